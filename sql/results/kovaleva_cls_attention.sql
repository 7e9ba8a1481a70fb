-- Kovaleva et al. Fig. 7: per final-layer head, the weight the [CLS] row gives each feature
-- type (max over the example's tokens of that type, averaged over examples with the type;
-- int_feature_attention_means), with its 95% seeded bootstrap interval over the examples
-- (ci_low, ci_high). A row is already normalized (its weights sum to 1), so `score` is not
-- divided by the length (docs/methods.md §3.5); score_per_length is the other reading of the
-- caption's "averaged over input sequences' lengths": each example's weight divided by its
-- length before the mean (per_length_ci_low / per_length_ci_high its interval).
-- A model fine-tuned on the task (int_finetuned_models) has role `fine-tuned` and its base in
-- base_model_id (a pre-trained model: its own id), to draw both per task side by side.
CREATE OR REPLACE VIEW kovaleva_cls_attention AS
SELECT
    model,
    model_id,
    corpus,
    corpus AS task,
    feature,
    head,
    from_cls AS score,
    from_cls_examples AS n_examples,
    role,
    base_model_id,
    base_model,
    from_cls_ci_low AS ci_low,
    from_cls_ci_high AS ci_high,
    from_cls_per_length AS score_per_length,
    from_cls_per_length_ci_low AS per_length_ci_low,
    from_cls_per_length_ci_high AS per_length_ci_high
FROM int_feature_attention_means
WHERE layer = n_layers AND from_cls_examples > 0;
