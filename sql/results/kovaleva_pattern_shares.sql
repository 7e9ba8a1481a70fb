-- Kovaleva et al. Fig. 2: share of each attention-pattern class among the (example, layer,
-- head) maps of a corpus (task = the corpus, e.g. glue_mrpc), by the rules of
-- metrics.pattern_classes (thresholds: the fact asset's `pattern_thresholds` metadata).
-- Classes no map fell into get share 0. Compare heterogeneous: 32% (MRPC) to 61% (QQP) in BERT-base.
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
    coalesce(c.maps, 0) / sum(coalesce(c.maps, 0)) OVER (PARTITION BY g.model_id, g.corpus) AS share
FROM grid AS g
LEFT JOIN counts AS c USING (model_id, corpus, pattern);
