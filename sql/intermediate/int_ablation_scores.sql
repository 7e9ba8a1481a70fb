-- Kovaleva §4.6 ablation scores in % (correlations x 100), with the change against the same
-- model with no head disabled.
CREATE OR REPLACE VIEW int_ablation_scores AS
SELECT
    model,
    model_id,
    corpus,
    task,
    tuned_model_id,
    kind,
    layer,
    head,
    metric,
    100 * score AS score,
    100 * baseline_score AS baseline_score,
    100 * (score - baseline_score) AS delta_vs_baseline,
    n_examples,
    (layer - 0.5) / n_layers AS relative_depth
FROM stg_ablation_scores;
