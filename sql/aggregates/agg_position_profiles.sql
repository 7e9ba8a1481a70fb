-- Fills agg_position_profiles for one (model_id, corpus): the attention histograms' weights and
-- (query, key) pair counts summed over the corpus's examples, per head and offset.
SELECT kind, scope, layer, head, "offset", sum(weight_sum) AS weight_sum, sum(pair_count)::BIGINT AS pair_count
FROM stg_position_histograms
WHERE model_id = $model_id AND corpus = $corpus
GROUP BY ALL;
