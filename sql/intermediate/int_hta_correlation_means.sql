-- Mean over examples of each head's attention-contribution correlations.
CREATE OR REPLACE VIEW int_hta_correlation_means AS
SELECT
    model,
    model_id,
    corpus,
    kind,
    hta_method,
    layer,
    head,
    avg(pearson) AS pearson,
    avg(spearman) AS spearman,
    count(*) AS n_examples,
    (layer - 0.5) / n_layers AS relative_depth
FROM stg_hta_correlations
GROUP BY ALL;
