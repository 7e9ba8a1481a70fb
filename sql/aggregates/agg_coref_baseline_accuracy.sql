-- Fills agg_coref_baseline_accuracy for one (model_id, corpus): per (system, mention type and
-- 'all', example) the coreferent mentions whose picked antecedent (coref_baseline_predictions) is
-- one of their gold antecedents, and how many there are: over the mentions the heads are judged
-- on (int_coref_scored_mentions), so heads and baselines share their n.
WITH coreferent AS (
    SELECT model_id, corpus, example_id, mention_id, mention_type
    FROM int_coref_scored_mentions
    WHERE model_id = $model_id AND corpus = $corpus
),
systems AS (
    SELECT DISTINCT system
    FROM stg_coref_baseline_predictions
    WHERE model_id = $model_id AND corpus = $corpus
),
judged AS (
    -- every coreferent mention under every system: one the system made no prediction for (head
    -- match without a same-head candidate) is wrong
    SELECT
        s.system,
        c.mention_type,
        c.example_id,
        a.antecedent_id IS NOT NULL AS correct
    FROM coreferent AS c
    CROSS JOIN systems AS s
    LEFT JOIN stg_coref_baseline_predictions AS p
        ON p.model_id = c.model_id
        AND p.corpus = c.corpus
        AND p.example_id = c.example_id
        AND p.mention_id = c.mention_id
        AND p.system = s.system
    LEFT JOIN int_coref_antecedents AS a
        ON a.model_id = c.model_id
        AND a.corpus = c.corpus
        AND a.example_id = c.example_id
        AND a.mention_id = c.mention_id
        AND a.antecedent_id = p.antecedent_id
)
SELECT
    system,
    coalesce(mention_type, 'all') AS mention_type,
    example_id,
    count_if(correct) AS accuracy_num,
    count(*) AS accuracy_den
FROM judged
GROUP BY GROUPING SETS ((system, mention_type, example_id), (system, example_id));
