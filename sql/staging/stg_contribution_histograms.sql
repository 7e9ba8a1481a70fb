-- Staging for `contribution_histograms` (dense rows, sql/schema/contribution_histograms.sql) in
-- the flat grain of stg_position_histograms (one row per example, scope, layer, head and offset
-- a pair reaches, weight_sum and pair_count unpacked the same way), with kind = contribution and
-- the run's hta_method, and the model's readable name and shape from `models`. The staging
-- rules: stg_models.sql.
CREATE OR REPLACE VIEW stg_contribution_histograms AS
WITH current_rows AS (
    -- every row with its (example, scope)'s pair counts, held by the row of its first head
    SELECT * REPLACE (any_value(pair_counts) OVER (PARTITION BY model_id, corpus, example_id, scope) AS pair_counts)
    FROM contribution_histograms
    WHERE batch_id IN (SELECT batch_id FROM stg_batches WHERE table_name = 'contribution_histograms')
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
        t.hta_method,
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
    'contribution' AS kind,
    scope,
    layer,
    head,
    (position - 1 - reach)::SMALLINT AS "offset",
    ((one_plus_sqrt_mean_weight::DOUBLE - 1) ** 2 * pair_count)::FLOAT AS weight_sum,
    pair_count::INTEGER AS pair_count,
    hta_method,
    n_layers,
    n_heads
FROM unnested
WHERE pair_count > 0;
