-- Kovaleva Fig. 9: the fine-tuned model's validation score (in %) with every head of one layer
-- attending uniformly, against no head disabled.
CREATE OR REPLACE VIEW kovaleva_layer_ablation AS
SELECT
    m.source AS model,
    a.model_id,
    a.corpus,
    a.task,
    a.tuned_model_id,
    a.layer,
    a.metric,
    100 * a.score AS score,
    100 * a.baseline_score AS baseline_score,
    100 * (a.score - a.baseline_score) AS delta_vs_baseline,
    a.n_examples
FROM ablation_scores AS a
JOIN models AS m USING (model_id)
WHERE a.kind = 'layer';
