-- Staging for `ablation_scores` (columns in sql/schema/ablation_scores.sql): every row and column,
-- with the model's readable name and shape from `models`. The staging rules: stg_models.sql.
CREATE OR REPLACE VIEW stg_ablation_scores AS
SELECT
    m.source AS model,
    t.* EXCLUDE (batch_id),
    m.n_layers,
    m.n_heads
FROM ablation_scores AS t
JOIN models AS m USING (model_id)
WHERE t.batch_id IN (SELECT batch_id FROM stg_batches WHERE table_name = 'ablation_scores');
