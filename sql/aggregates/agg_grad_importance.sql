-- Fills agg_grad_importance for one (model_id, corpus): per (layer, target type, run settings,
-- example) the example's mean gradient magnitude over its heads and weights (num = that mean,
-- den = 1), so the corpus value is the mean of per-example means like the other corpus means
-- (docs/methods.md §3.1) and a long example weighs no more than a short one; n_weights: the
-- weights summed.
SELECT
    layer,
    target_type,
    loss_name,
    mask_probability,
    seed,
    example_id,
    sum(grad_sum) / sum(weight_count) AS grad_magnitude_num,
    1 AS grad_magnitude_den,
    sum(weight_count) AS n_weights_total
FROM stg_grad_importance
WHERE model_id = $model_id AND corpus = $corpus
GROUP BY ALL;
