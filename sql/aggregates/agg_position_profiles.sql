-- Fills agg_position_profiles for one (model_id, corpus): the relative-position histograms of
-- attention and of the HTA input contribution (int_position_histograms: kind) summed over the
-- corpus's examples, per head and offset: the weights and how many (query, key) pairs they sum.
-- value_max_normalized: the mean weight per pair at the offset over the head's largest (Pascual's plots).
WITH sums AS (
    SELECT kind, scope, layer, head, "offset", sum(weight_sum) AS weight_sum, sum(pair_count)::BIGINT AS pair_count
    FROM int_position_histograms
    WHERE model_id = $model_id AND corpus = $corpus
    GROUP BY ALL
)
SELECT
    *,
    (weight_sum / pair_count) / max(weight_sum / pair_count) OVER (PARTITION BY kind, scope, layer, head)
        AS value_max_normalized
FROM sums;
