-- Kovaleva et al. Fig. 7: per final-layer head, the weight the [CLS] row gives each feature
-- type (max over the example's tokens of that type, averaged over examples with the type).
CREATE OR REPLACE VIEW kovaleva_cls_attention AS
SELECT
    model,
    model_id,
    corpus,
    corpus AS task,
    feature,
    head,
    avg(from_cls) AS score,
    count(*) AS n_examples
FROM int_feature_received_attention
WHERE layer = n_layers AND NOT isnan(from_cls)
GROUP BY ALL;
