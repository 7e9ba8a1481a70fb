-- Staging for `contribution_histograms` (dense rows, sql/schema/contribution_histograms.sql) in
-- the flat grain of stg_position_histograms (one row per example, scope, layer, head and offset
-- a pair reaches, weight_sum and pair_count unpacked the same way), with kind = contribution and
-- the run's hta_method, and the model's readable name and shape from `models`. The staging
-- rules: stg_models.sql.
CREATE OR REPLACE VIEW stg_contribution_histograms AS
WITH unnested AS (
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
        unnest(t.mean_weights_plus_one) AS mean_weight_plus_one,
        t.hta_method,
        m.n_layers,
        m.n_heads
    FROM contribution_histograms AS t
    JOIN models AS m USING (model_id)
    WHERE t.batch_id IN (SELECT batch_id FROM stg_batches WHERE table_name = 'contribution_histograms')
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
    ((mean_weight_plus_one::DOUBLE - 1) * pair_count)::FLOAT AS weight_sum,
    pair_count::INTEGER AS pair_count,
    hta_method,
    n_layers,
    n_heads
FROM unnested
WHERE pair_count > 0;
