-- Pascual's normalized relative-position histogram per head: the weight at an offset
-- summed over the corpus, divided by how many (query, key) pairs sit at that offset, and scaled to
-- the head's maximum as Pascual et al. plot them (value_max_normalized). The sums are
-- materialized per partition in agg_position_profiles (sql/aggregates/ says how); the per-example
-- histograms stay in int_position_histograms.
CREATE OR REPLACE VIEW int_position_profiles AS
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
FROM stg_agg_position_profiles;
