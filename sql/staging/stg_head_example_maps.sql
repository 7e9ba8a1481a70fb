-- Staging for `head_example_maps` (dense rows, sql/schema/head_example_maps.sql) in the flat
-- grain the views read: one row per (example, layer, head, query, key) with the key's 0-based
-- position and its weight, and the model's readable name and shape from `models`. The staging
-- rules: stg_models.sql.
CREATE OR REPLACE VIEW stg_head_example_maps AS
WITH unnested AS (
    SELECT
        m.source AS model,
        t.model_id,
        t.corpus,
        t.example_id,
        t.layer,
        t.head,
        t.query,
        generate_subscripts(t.attention, 1) - 1 AS key,
        unnest(t.attention) AS attention,
        t.kept_examples,
        m.n_layers,
        m.n_heads
    FROM head_example_maps AS t
    JOIN models AS m USING (model_id)
    WHERE t.batch_id IN (SELECT batch_id FROM stg_batches WHERE table_name = 'head_example_maps')
)
SELECT
    model,
    model_id,
    corpus,
    example_id,
    layer,
    head,
    query,
    key::SMALLINT AS key,
    attention,
    kept_examples,
    n_layers,
    n_heads
FROM unnested;
