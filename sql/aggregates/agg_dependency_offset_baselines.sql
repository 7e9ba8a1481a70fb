-- Fills agg_dependency_offset_baselines for one (model_id, corpus): per (relation, offset -3..+3,
-- example) the scored edges whose head is `offset` words from the dependent (+1: the word to the
-- right), and how many there are: the same edges as the heads' (int_dependency_scored_edges).
WITH offsets AS (
    SELECT unnest([-3, -2, -1, 1, 2, 3]) AS baseline_offset
)
SELECT
    e.word_mode,
    e.relation,
    o.baseline_offset,
    e.example_id,
    count_if(e.head_word - e.dependent_word = o.baseline_offset) AS accuracy_num,
    count(*) AS accuracy_den
FROM int_dependency_scored_edges AS e
CROSS JOIN offsets AS o
WHERE e.model_id = $model_id AND e.corpus = $corpus
GROUP BY ALL;
