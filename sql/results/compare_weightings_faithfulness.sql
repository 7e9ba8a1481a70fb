-- Faithfulness of the weightings of the maps (Modarressi et al. 2022, GlobEnc §5; docs/methods.md §3.9):
-- per model, corpus (a fine-tuned classifier's task), weighting and aggregation, the Spearman correlation
-- between the weighting's [CLS] row of the last layer and the gradient x input saliency of the classifier's
-- prediction, over examples: `mean_spearman` the plain mean (what GlobEnc reports), `spearman` the mean
-- in Fisher's z (atanh of each example's correlation, clamped off +/-1, averaged, back through tanh)
-- and ci_low/ci_high its 95% interval (a normal interval of the z mean). Examples without a correlation
-- (a constant row) are left out. aggregation: `rolled_out`, every layer's maps multiplied through (GlobEnc's
-- global setting, in which it compares every map with the saliency; its reference run on BERT-base SST-2,
-- layer 12: N_Enc 0.77, N 0.44, raw attention W -0.11, attention rollout with the fixed 0.5 residual -0.24);
-- `per_layer`, the last layer's own map (its local setting). A claim reads the rows of the convention of
-- the paper that reports its number.
CREATE OR REPLACE VIEW compare_weightings_faithfulness AS
WITH per_example AS (
    SELECT
        model,
        model_id,
        corpus,
        weighting,
        aggregation,
        spearman,
        atanh(least(greatest(spearman, -0.999999), 0.999999)) AS z
    FROM stg_weighted_saliency_correlations
    WHERE spearman IS NOT NULL
),
per_weighting AS (
    SELECT
        model,
        model_id,
        corpus,
        weighting,
        aggregation,
        avg(spearman) AS mean_spearman,
        avg(z) AS mean_z,
        1.959963984540054 * stddev_samp(z) / sqrt(count(*)) AS z_margin,
        count(*) AS n_examples
    FROM per_example
    GROUP BY model, model_id, corpus, weighting, aggregation
)
SELECT
    model,
    model_id,
    corpus,
    weighting,
    aggregation,
    mean_spearman,
    tanh(mean_z) AS spearman,
    tanh(mean_z - z_margin) AS ci_low,
    tanh(mean_z + z_margin) AS ci_high,
    n_examples
FROM per_weighting
ORDER BY model_id, corpus, aggregation, mean_spearman;
