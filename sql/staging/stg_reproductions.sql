-- Staging for `reproductions` (columns: sql/schema/reproductions.sql): the profile of each registered
-- model's last finished reproduction, with its readable name. One that started and did not finish
-- is left out: the model's rows are then partly another run's, and labelling them by it would be wrong.
CREATE OR REPLACE VIEW stg_reproductions AS
SELECT
    m.model,
    r.* EXCLUDE (finished)
FROM reproductions AS r
INNER JOIN stg_models AS m USING (model_id)
WHERE coalesce(r.finished, true);
