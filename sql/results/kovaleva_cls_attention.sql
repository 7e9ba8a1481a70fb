-- Kovaleva et al. Fig. 7: per final-layer head, the weight the [CLS] row gives each feature
-- type (max over the example's tokens of that type, averaged over examples with the type).
CREATE OR REPLACE VIEW kovaleva_cls_attention AS
SELECT
    m.source AS model,
    f.model_id,
    f.corpus,
    f.corpus AS task,
    f.feature,
    f.head,
    avg(f.from_cls) AS score,
    count(*) AS n_examples
FROM feature_received_attention AS f
JOIN models AS m USING (model_id)
WHERE f.layer = m.n_layers AND NOT isnan(f.from_cls)
GROUP BY ALL;
