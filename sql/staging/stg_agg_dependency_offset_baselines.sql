-- Staging for `agg_dependency_offset_baselines` (columns in sql/schema/agg_dependency_offset_baselines.sql): every row and column, with the model's
-- readable name and shape from `models`. The staging rules: stg_models.sql.
CREATE OR REPLACE VIEW stg_agg_dependency_offset_baselines AS
SELECT
    m.source AS model,
    t.* EXCLUDE (batch_id),
    m.n_layers,
    m.n_heads
FROM agg_dependency_offset_baselines AS t
JOIN models AS m USING (model_id)
WHERE t.batch_id IN (SELECT batch_id FROM stg_batches WHERE table_name = 'agg_dependency_offset_baselines');
