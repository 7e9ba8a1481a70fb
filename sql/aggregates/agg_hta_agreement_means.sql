-- Fills agg_hta_agreement_means for one (model_id, corpus): per (weighting, aggregation, HTA method,
-- layer, example) the example's mean row Spearman of the weighting's map (per layer or rolled out) with
-- HTA's input contribution (num = that mean, den = 1 where it has one), so the corpus value is the mean
-- of per-example means as GlobEnc reports it; n_rows: the query rows with a correlation, summed.
SELECT
    weighting,
    aggregation,
    hta_method,
    layer,
    example_id,
    spearman AS spearman_num,
    CASE WHEN spearman IS NOT NULL THEN 1 END AS spearman_den,
    n_rows AS n_rows_total
FROM stg_weighted_hta_agreement
WHERE model_id = $model_id AND corpus = $corpus;
