-- Staging for `word_features` (columns in sql/schema/word_features.sql): every row and column, with
-- the model's readable name and shape from `models`. The staging rules: stg_models.sql.
CREATE OR REPLACE VIEW stg_word_features AS
SELECT
    m.source AS model,
    t.* EXCLUDE (batch_id),
    m.n_layers,
    m.n_heads
FROM word_features AS t
JOIN models AS m USING (model_id)
WHERE t.batch_id IN (SELECT batch_id FROM stg_batches WHERE table_name = 'word_features');
