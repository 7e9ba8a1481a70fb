-- Kovaleva Fig. 9: the fine-tuned model's validation score (in %) with every head of one layer
-- attending uniformly, against no head disabled.
CREATE OR REPLACE VIEW kovaleva_layer_ablation AS
SELECT
    model,
    model_id,
    corpus,
    task,
    tuned_model_id,
    layer,
    metric,
    score,
    baseline_score,
    delta_vs_baseline,
    n_examples,
    relative_depth
FROM int_ablation_scores
WHERE kind = 'layer';
