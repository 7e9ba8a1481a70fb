-- Agreement of the weightings of the maps with HTA (GlobEnc, Modarressi et al. 2022; docs/methods.md
-- §3.9): per model, corpus, weighting, aggregation and layer, the mean over examples of each example's mean
-- row Spearman correlation between the weighting's map at the layer and Pascual's input contribution at the
-- layer (every head's context at once), every query row of the example ([CLS] and [SEP] included) over
-- every key; ci_low/ci_high its 95% seeded bootstrap interval over the examples, n_examples the examples
-- with a correlation, n_rows the query rows behind them. On the examples of the HTA run (hta_method as
-- there). aggregation: `per_layer`, the layer's own map, as GlobEnc's reference code compares each layer
-- with HTA (0.84-0.96 per layer on BERT-base for its encoder-layer maps: read these rows for that figure);
-- `rolled_out`, the maps of layers 1..layer multiplied through, an input attribution like HTA itself (a
-- reading of the warehouse's own, with no published figure to compare it with).
CREATE OR REPLACE VIEW compare_weightings_hta_agreement AS
SELECT
    model,
    model_id,
    corpus,
    weighting,
    aggregation,
    hta_method,
    layer,
    (layer - 0.5) / n_layers AS relative_depth,
    spearman,
    spearman_ci_low AS ci_low,
    spearman_ci_high AS ci_high,
    spearman_n::BIGINT AS n_examples,
    n_rows::BIGINT AS n_rows
FROM stg_weighted_agg_hta_agreement_means
WHERE spearman IS NOT NULL
ORDER BY model_id, corpus, aggregation, weighting, layer;
