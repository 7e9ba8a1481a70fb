-- Kovaleva §4.4-4.5 per feature type (or linked pair) and head, the means over examples of
-- agg_feature_attention (sql/aggregates/ says how): `received` and the final layer's `from_cls`
-- (and `from_cls_per_length`, each example's weight divided by its length),
-- each with its 95% seeded bootstrap interval over the examples and its number of examples; with
-- the model's role on the task: a model fine-tuned on it (int_finetuned_models) is `fine-tuned`
-- with its base in base_model_id / base_model, a pre-trained model is its own base.
CREATE OR REPLACE VIEW int_feature_attention_means AS
SELECT
    s.model,
    s.model_id,
    s.corpus,
    s.feature,
    s.layer,
    s.head,
    s.n_layers,
    (s.layer - 0.5) / s.n_layers AS relative_depth,
    s.received,
    s.received_ci_low,
    s.received_ci_high,
    s.received_n::BIGINT AS received_examples,
    s.from_cls,
    s.from_cls_ci_low,
    s.from_cls_ci_high,
    s.from_cls_n::BIGINT AS from_cls_examples,
    s.from_cls_per_length,
    s.from_cls_per_length_ci_low,
    s.from_cls_per_length_ci_high,
    CASE WHEN f.base_model_id IS NULL THEN 'pre-trained' ELSE 'fine-tuned' END AS role,
    coalesce(f.base_model_id, s.model_id) AS base_model_id,
    coalesce(f.base_model, s.model) AS base_model
FROM stg_agg_feature_attention AS s
LEFT JOIN int_finetuned_models AS f ON f.tuned_model_id = s.model_id AND f.corpus = s.corpus;
