-- Kovaleva et al. Fig. 7: per final-layer head, the weight the [CLS] row gives each feature
-- type (max over the example's tokens of that type, averaged over examples with the type;
-- materialized per partition in agg_feature_attention, sql/aggregates/ says how), with its 95%
-- seeded bootstrap interval over the examples (ci_low, ci_high).
-- A model fine-tuned on the task (int_finetuned_models) has role `fine-tuned` and its base in
-- base_model_id (a pre-trained model: its own id), to draw both per task side by side.
CREATE OR REPLACE VIEW kovaleva_cls_attention AS
WITH scores AS (
    SELECT
        model,
        model_id,
        corpus,
        feature,
        head,
        from_cls AS score,
        from_cls_n::BIGINT AS n_examples,
        from_cls_ci_low AS ci_low,
        from_cls_ci_high AS ci_high
    FROM stg_agg_feature_attention
    WHERE layer = n_layers AND from_cls_n > 0
)
SELECT
    s.model,
    s.model_id,
    s.corpus,
    s.corpus AS task,
    s.feature,
    s.head,
    s.score,
    s.n_examples,
    CASE WHEN f.base_model_id IS NULL THEN 'pre-trained' ELSE 'fine-tuned' END AS role,
    coalesce(f.base_model_id, s.model_id) AS base_model_id,
    coalesce(f.base_model, s.model) AS base_model,
    s.ci_low,
    s.ci_high
FROM scores AS s
LEFT JOIN int_finetuned_models AS f ON f.tuned_model_id = s.model_id AND f.corpus = s.corpus;
