-- Kovaleva et al. Fig. 2: share of each attention-pattern class among the (example, layer,
-- head) maps of a corpus (task = the corpus, e.g. glue_mrpc), by the rules of
-- metrics.pattern_classes (thresholds: the fact asset's `pattern_thresholds` metadata).
-- Classes no map fell into get share 0. Compare heterogeneous: 32% (MRPC) to 61% (QQP) in BERT-base.
-- The paper measures fine-tuned models: a model fine-tuned on the task (int_finetuned_models)
-- has role `fine-tuned` and its base in base_model_id (its own id for a pre-trained model), so
-- the rows WHERE base_model_id = <base> hold both models of every task. Materialized per
-- partition in agg_pattern_shares (sql/aggregates/ says how); ci_low / ci_high: the share's 95%
-- seeded bootstrap interval over the examples.
CREATE OR REPLACE VIEW kovaleva_pattern_shares AS
SELECT
    s.model,
    s.model_id,
    s.corpus,
    s.corpus AS task,
    s.pattern,
    s.pattern_order,
    s.maps::BIGINT AS maps,
    s.share,
    CASE WHEN f.base_model_id IS NULL THEN 'pre-trained' ELSE 'fine-tuned' END AS role,
    coalesce(f.base_model_id, s.model_id) AS base_model_id,
    coalesce(f.base_model, s.model) AS base_model,
    s.share_ci_low AS ci_low,
    s.share_ci_high AS ci_high,
    s.n_examples
FROM stg_agg_pattern_shares AS s
LEFT JOIN int_finetuned_models AS f ON f.tuned_model_id = s.model_id AND f.corpus = s.corpus;
