-- Pascual's normalized relative-position histogram per head: the weight at an offset
-- summed over the corpus, divided by how many (query, key) pairs sit at that offset.
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
    sum(weight_sum) / sum(pair_count) AS value,
    sum(pair_count)::BIGINT AS n_pairs,
    relative_depth
FROM int_position_histograms
GROUP BY ALL;
