-- Pascual's normalized relative-position histogram per head: the weight at an offset
-- summed over the corpus, divided by how many (query, key) pairs sit at that offset, and scaled to
-- the head's maximum as Pascual et al. plot them (value_max_normalized). The sums are
-- materialized per partition (agg_position_profiles: attention, agg_contribution_profiles: the HTA
-- input contribution; sql/aggregates/), the per-example histograms stay in int_position_histograms.
CREATE OR REPLACE VIEW int_position_profiles AS
WITH sums AS (
    SELECT * FROM stg_agg_position_profiles
    UNION ALL
    SELECT * FROM stg_agg_contribution_profiles
)
SELECT
    model,
    model_id,
    corpus,
    kind,
    scope,
    layer,
    head,
    "offset",
    weight_sum / pair_count AS value,
    pair_count AS n_pairs,
    value_max_normalized,
    (layer - 0.5) / n_layers AS relative_depth
FROM sums;
