-- Fills agg_grad_importance for one (model_id, corpus): per (layer, target type, run settings,
-- example) the gradient magnitudes summed over the example's heads and weights, and how many
-- weights they sum (Clark Fig. 3 pools every weight of every head and example).
SELECT
    layer,
    target_type,
    loss_name,
    mask_probability,
    seed,
    example_id,
    sum(grad_sum) AS grad_magnitude_num,
    sum(weight_count) AS grad_magnitude_den
FROM stg_grad_importance
WHERE model_id = $model_id AND corpus = $corpus
GROUP BY ALL;
