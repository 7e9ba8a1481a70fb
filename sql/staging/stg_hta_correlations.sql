-- Staging for `hta_correlations` (columns in sql/schema/hta_correlations.sql): every row and
-- column, with the model's readable name and shape from `models`. The staging rules:
-- stg_models.sql.
CREATE OR REPLACE VIEW stg_hta_correlations AS
SELECT
    m.source AS model,
    t.* EXCLUDE (batch_id),
    m.n_layers,
    m.n_heads
FROM hta_correlations AS t
JOIN models AS m USING (model_id)
WHERE t.batch_id IN (SELECT batch_id FROM stg_batches WHERE table_name = 'hta_correlations');
