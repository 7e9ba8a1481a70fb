-- Fills agg_hta_correlation_means for one (model_id, corpus): per (kind, HTA method, head,
-- example) the correlations of attention with the contribution (NULL: left out of the mean).
SELECT
    kind,
    hta_method,
    layer,
    head,
    example_id,
    pearson AS pearson_num,
    (pearson IS NOT NULL)::INTEGER AS pearson_den,
    spearman AS spearman_num,
    (spearman IS NOT NULL)::INTEGER AS spearman_den
FROM stg_hta_correlations
WHERE model_id = $model_id AND corpus = $corpus;
