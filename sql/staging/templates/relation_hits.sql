-- Staging for `relation_hits` (dense rows, sql/schema/{table}.sql) in the flat grain the views
-- read: one row per (example, word with a hit, layer, head) with word_index and target_word, and
-- the model's readable name and shape from `models`. storage/sql_files.py instantiates it twice:
-- stg_relation_hits keeps the rows taken on the attention maps (the registry's clause after the
-- WHERE), stg_weighted_relation_hits every weighting's (docs/methods.md §3.9: attention, norm,
-- rollout with head 0). The staging rules: stg_models.sql.
CREATE OR REPLACE VIEW {view} AS
WITH unnested AS (
    SELECT
        m.source AS model,
        t.model_id,
        t.corpus,
        t.example_id,
        generate_subscripts(t.target_words, 1) - 1 AS word_index,
        t.layer,
        t.head,
        unnest(t.target_words) AS target_word,
        t.word_mode,
        t.weighting,
        m.n_layers,
        m.n_heads
    FROM {table} AS t
    JOIN models AS m USING (model_id)
    WHERE t.batch_id IN (SELECT batch_id FROM stg_batches WHERE table_name = '{table}')
    {rows}
)
SELECT
    model,
    model_id,
    corpus,
    example_id,
    word_index::INTEGER AS word_index,
    layer,
    head,
    target_word::INTEGER AS target_word,
    word_mode,
    weighting,
    n_layers,
    n_heads
FROM unnested
WHERE target_word IS NOT NULL;
