-- Clark et al. Fig. 3: mean magnitude of the gradient of the model's loss with respect to
-- each attention weight, per layer, for attention to [SEP], to '.'/',' and to other tokens:
-- the mean over examples of each example's mean over its heads and weights (every example
-- weighs the same, like the other corpus means). In BERT-base the [SEP] gradients
-- become very small from layer 5 on. Materialized per partition in agg_grad_importance
-- (sql/aggregates/ says how); ci_low / ci_high: 95% seeded bootstrap interval over the examples.
CREATE OR REPLACE VIEW clark_grad_importance AS
SELECT
    model,
    model_id,
    corpus,
    layer,
    target_type,
    grad_magnitude,
    loss_name,
    mask_probability,
    seed,
    n_examples,
    n_weights::BIGINT AS n_weights,
    (layer - 0.5) / n_layers AS relative_depth,
    grad_magnitude_ci_low AS ci_low,
    grad_magnitude_ci_high AS ci_high
FROM stg_agg_grad_importance;
