-- Fills agg_feature_attention for one (model_id, corpus): per (feature, layer, head, example with
-- the feature) the values that Kovaleva §4.4-4.5 averages over examples. `received`: the largest
-- attention a token of the feature type receives (int_feature_received_attention); for a linked
-- pair (verb->subject, noun->pronoun) the mean attention over the example's pairs. `from_cls`: the
-- final layer's largest [CLS]-row weight on the type (none on other layers, for pairs, or NaN);
-- `from_cls_per_length` the same divided by the example's length (Fig. 7's other reading).
SELECT
    feature,
    layer,
    head,
    example_id,
    received AS received_num,
    1 AS received_den,
    CASE WHEN layer = n_layers AND NOT isnan(from_cls) THEN from_cls END AS from_cls_num,
    coalesce(layer = n_layers AND NOT isnan(from_cls), false)::INTEGER AS from_cls_den,
    CASE WHEN layer = n_layers AND NOT isnan(from_cls) THEN from_cls / n_tokens END AS from_cls_per_length_num,
    coalesce(layer = n_layers AND NOT isnan(from_cls), false)::INTEGER AS from_cls_per_length_den
FROM int_feature_received_attention
WHERE model_id = $model_id AND corpus = $corpus
UNION ALL
SELECT replace(pair, '_', '->'), layer, head, example_id, attention, 1, NULL, 0, NULL, 0
FROM stg_feature_pair_attention
WHERE model_id = $model_id AND corpus = $corpus;
