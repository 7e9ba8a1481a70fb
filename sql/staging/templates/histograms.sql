-- Staging for a relative-position histogram table in the dense grain (sql/schema/{table}.sql) in
-- the flat grain the views read: one row per (example, scope, layer, head, offset) that a pair
-- reaches, with kind = {kind} (what the table measures: the maps' mass, or HTA's contributions;
-- the same on every weighting's row, whose weighting of the maps is its own `weighting` column in
-- the stg_weighted_ view), weight_sum (the stored mean times the pair count, see the schema
-- for its precision) and pair_count, the run's parameters (every column after the two lists, such
-- as hta_method), and the model's readable name and shape from `models`. storage/sql_files.py
-- instantiates it for position_histograms and contribution_histograms; for a table with rows per
-- weighting, stg_<table> keeps the attention rows (the registry's clause in current_rows) and
-- stg_weighted_<table> every row. The staging rules: stg_models.sql.
CREATE OR REPLACE VIEW {view} AS
WITH current_rows AS (
    -- every row with its (example, scope)'s pair counts, held by the row of its first head
    SELECT * REPLACE (any_value(pair_counts) OVER (PARTITION BY model_id, corpus, example_id, scope) AS pair_counts)
    FROM {table}
    WHERE batch_id IN (SELECT batch_id FROM stg_batches WHERE table_name = '{table}')
    {rows}
),
unnested AS (
    SELECT
        m.source AS model,
        t.model_id,
        t.corpus,
        t.example_id,
        t.scope,
        t.layer,
        t.head,
        (len(t.pair_counts) - 1) // 2 AS reach,
        generate_subscripts(t.pair_counts, 1) AS position,
        unnest(t.pair_counts) AS pair_count,
        unnest(t.one_plus_sqrt_mean_weights) AS one_plus_sqrt_mean_weight,
        t.* EXCLUDE (model_id, corpus, example_id, scope, layer, head, pair_counts, one_plus_sqrt_mean_weights, batch_id),
        m.n_layers,
        m.n_heads
    FROM current_rows AS t
    JOIN models AS m USING (model_id)
)
SELECT
    model,
    model_id,
    corpus,
    example_id,
    '{kind}' AS kind,
    scope,
    layer,
    head,
    (position - 1 - reach)::SMALLINT AS "offset",
    ((one_plus_sqrt_mean_weight::DOUBLE - 1) ** 2 * pair_count)::FLOAT AS weight_sum,
    pair_count::INTEGER AS pair_count,
    * EXCLUDE (
        model, model_id, corpus, example_id, scope, layer, head, reach, position, pair_count,
        one_plus_sqrt_mean_weight, n_layers, n_heads
    ),
    n_layers,
    n_heads
FROM unnested
WHERE pair_count > 0;
