-- Mean over examples of each head's attention-contribution correlations (materialized per
-- partition in agg_hta_correlation_means; sql/aggregates/ says how), with each mean's 95% seeded
-- bootstrap interval over the examples (pearson_ci_low, ..., spearman_ci_high).
CREATE OR REPLACE VIEW int_hta_correlation_means AS
SELECT
    model,
    model_id,
    corpus,
    kind,
    hta_method,
    layer,
    head,
    pearson,
    spearman,
    n_examples,
    (layer - 0.5) / n_layers AS relative_depth,
    pearson_ci_low,
    pearson_ci_high,
    spearman_ci_low,
    spearman_ci_high
FROM stg_agg_hta_correlation_means;
