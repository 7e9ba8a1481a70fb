-- Staging for `finetune_cosines` (columns: sql/schema/finetune_cosines.sql): every row and column of
-- the table, with the readable names of both models from `models`: `model` (the base model, the
-- partition the rows belong to) and `tuned_model` (tuned_model_id), and the base model's shape.
CREATE OR REPLACE VIEW stg_finetune_cosines AS
SELECT
    m.source AS model,
    t.* EXCLUDE (batch_id),
    m.n_layers,
    m.n_heads,
    tm.source AS tuned_model
FROM finetune_cosines AS t
JOIN models AS m USING (model_id)
JOIN models AS tm ON tm.model_id = t.tuned_model_id
WHERE t.batch_id IN (SELECT batch_id FROM stg_batches WHERE table_name = 'finetune_cosines');
