-- Staging for `reproductions` (columns: sql/schema/reproductions.sql): the last reproduction profile
-- of each registered model, with its readable name.
CREATE OR REPLACE VIEW stg_reproductions AS
SELECT
    m.model,
    r.*
FROM reproductions AS r
INNER JOIN stg_models AS m USING (model_id);
