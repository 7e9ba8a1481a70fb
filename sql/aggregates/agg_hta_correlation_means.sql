-- Fills agg_hta_correlation_means for one (model_id, corpus): per (kind, HTA method, head,
-- example) the sums over its query rows of the correlations of attention with the contribution
-- and the number of rows, so that a head's mean is over every row pair of the corpus, long
-- examples weighing by their length (NULL: left out of the mean).
SELECT
    kind,
    hta_method,
    layer,
    head,
    example_id,
    pearson * n_rows AS pearson_num,
    CASE WHEN pearson IS NOT NULL THEN n_rows END AS pearson_den,
    spearman * n_rows AS spearman_num,
    CASE WHEN spearman IS NOT NULL THEN n_rows END AS spearman_den
FROM stg_hta_correlations
WHERE model_id = $model_id AND corpus = $corpus;
