-- Ablation scores (in %) with the model's readable name and the change against no head disabled.
CREATE OR REPLACE VIEW stg_ablation_scores AS
SELECT
    m.source AS model,
    a.model_id,
    a.corpus,
    a.task,
    a.tuned_model_id,
    a.kind,
    a.layer,
    a.head,
    a.metric,
    100 * a.score AS score,
    100 * a.baseline_score AS baseline_score,
    100 * (a.score - a.baseline_score) AS delta_vs_baseline,
    a.n_examples
FROM ablation_scores AS a
JOIN models AS m USING (model_id);
