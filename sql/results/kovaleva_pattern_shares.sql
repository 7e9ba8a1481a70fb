-- Kovaleva et al. Fig. 2: share of each attention-pattern class among the (example, layer,
-- head) maps of a corpus (task = the corpus, e.g. glue_mrpc), by the rules of
-- metrics.pattern_classes (thresholds: the fact asset's `pattern_thresholds` metadata).
-- Classes no map fell into get share 0. Compare heterogeneous: 32% (MRPC) to 61% (QQP) in BERT-base.
-- The paper measures fine-tuned models: a model fine-tuned on the task (int_finetuned_models)
-- has role `fine-tuned` and its base in base_model_id (its own id for a pre-trained model), so
-- the rows WHERE base_model_id = <base> hold both models of every task.
CREATE OR REPLACE VIEW kovaleva_pattern_shares AS
WITH counts AS (
    SELECT model, model_id, corpus, pattern, count(*) AS maps
    FROM stg_head_summaries
    WHERE pattern IS NOT NULL
    GROUP BY ALL
),
grid AS (
    SELECT DISTINCT model, model_id, corpus, p.pattern, p.pattern_order
    FROM counts
    CROSS JOIN (
        VALUES ('vertical', 1), ('diagonal', 2), ('vertical+diagonal', 3), ('block', 4), ('heterogeneous', 5)
    ) AS p(pattern, pattern_order)
)
SELECT
    g.model,
    g.model_id,
    g.corpus,
    g.corpus AS task,
    g.pattern,
    g.pattern_order,
    coalesce(c.maps, 0) AS maps,
    coalesce(c.maps, 0) / sum(coalesce(c.maps, 0)) OVER (PARTITION BY g.model_id, g.corpus) AS share,
    CASE WHEN f.base_model_id IS NULL THEN 'pre-trained' ELSE 'fine-tuned' END AS role,
    coalesce(f.base_model_id, g.model_id) AS base_model_id,
    coalesce(f.base_model, g.model) AS base_model
FROM grid AS g
LEFT JOIN counts AS c USING (model_id, corpus, pattern)
LEFT JOIN int_finetuned_models AS f ON f.tuned_model_id = g.model_id AND f.corpus = g.corpus;
