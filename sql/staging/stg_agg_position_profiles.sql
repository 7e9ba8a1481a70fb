-- Staging for `agg_position_profiles` (columns in sql/schema/agg_position_profiles.sql): every row and column, with the model's
-- readable name and shape from `models`. The staging rules: stg_models.sql.
CREATE OR REPLACE VIEW stg_agg_position_profiles AS
SELECT
    m.source AS model,
    t.* EXCLUDE (batch_id),
    m.n_layers,
    m.n_heads
FROM agg_position_profiles AS t
JOIN models AS m USING (model_id)
WHERE t.batch_id IN (SELECT batch_id FROM stg_batches WHERE table_name = 'agg_position_profiles');
