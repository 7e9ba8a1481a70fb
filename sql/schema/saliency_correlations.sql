-- Faithfulness of the weightings of the maps (Modarressi et al. 2022, GlobEnc §5; docs/methods.md §3.9):
-- per (example, weighting, aggregation) the Spearman correlation, over the example's real tokens ([CLS] and
-- [SEP] included), between the weighting's [CLS] row of the last layer (heads averaged) and the gradient x
-- input saliency ||d z_c / d e_j * e_j|| of the classifier's predicted class c w.r.t. each word embedding
-- e_j. aggregation: per_layer, the last layer's own map; rolled_out, the maps of every layer multiplied
-- through (GlobEnc's global setting; compute/weightings.py AGGREGATIONS). Written for fine-tuned
-- classifiers on their task's corpus (compute/compare/faithfulness.py).
-- spearman: null where the attributions or the saliencies of the example are all equal.
CREATE TABLE IF NOT EXISTS saliency_correlations (
    model_id VARCHAR NOT NULL,
    corpus VARCHAR NOT NULL,
    example_id INTEGER NOT NULL,
    weighting VARCHAR NOT NULL,        -- attention | norm | rollout | globenc | alti | value_zeroing
    aggregation VARCHAR NOT NULL,      -- per_layer | rolled_out
    spearman DOUBLE,
    n_tokens SMALLINT NOT NULL,        -- the example's real tokens the correlation is over
    predicted_label SMALLINT NOT NULL  -- the class whose logit the saliency explains
);
-- Rows written before the aggregation column read each weighting one way: rollout, globenc and alti
-- rolled out, the others the last layer's own map.
ALTER TABLE saliency_correlations ADD COLUMN IF NOT EXISTS aggregation VARCHAR;
UPDATE saliency_correlations
SET aggregation = CASE WHEN weighting IN ('rollout', 'globenc', 'alti') THEN 'rolled_out' ELSE 'per_layer' END
WHERE aggregation IS NULL;
