-- Staging for `head_matches` (columns in sql/schema/head_matches.sql): every row and column, with
-- both models' readable names and shapes from `models` (the other model's prefixed other_). The
-- staging rules: stg_models.sql.
CREATE OR REPLACE VIEW stg_head_matches AS
SELECT
    m.source AS model,
    o.source AS other_model,
    t.* EXCLUDE (batch_id),
    m.n_layers,
    m.n_heads,
    o.n_layers AS other_n_layers,
    o.n_heads AS other_n_heads
FROM head_matches AS t
JOIN models AS m USING (model_id)
JOIN models AS o ON o.model_id = t.other_model_id
WHERE t.batch_id IN (SELECT batch_id FROM stg_batches WHERE table_name = 'head_matches');
