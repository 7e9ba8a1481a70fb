-- Clark et al. Fig. 3: mean magnitude of the gradient of the model's loss with respect to
-- each attention weight, per layer, for attention to [SEP], to '.'/',' and to other tokens
-- (every weight of every head and example counts once). In BERT-base the [SEP] gradients
-- become very small from layer 5 on.
CREATE OR REPLACE VIEW clark_grad_importance AS
SELECT
    model,
    model_id,
    corpus,
    layer,
    target_type,
    SUM(grad_sum) / SUM(weight_count)::DOUBLE AS grad_magnitude,
    loss_name,
    mask_probability,
    seed,
    COUNT(DISTINCT example_id) AS n_examples,
    SUM(weight_count)::BIGINT AS n_weights,
    (layer - 0.5) / n_layers AS relative_depth
FROM stg_grad_importance
GROUP BY model, model_id, corpus, layer, n_layers, target_type, loss_name, mask_probability, seed;
