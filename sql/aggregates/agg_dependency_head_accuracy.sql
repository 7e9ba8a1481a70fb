-- Fills agg_dependency_head_accuracy for one (model_id, corpus): per (relation, head, direction,
-- example) the scored edges (int_dependency_scored_edges) where the attending word's most-attended
-- other word (relation_hits) is the other end of the edge, and how many there are: dependent ->
-- head, and head -> dependent ('All', a UAS, dependent -> head only).
WITH edges AS (
    SELECT *
    FROM int_dependency_scored_edges
    WHERE model_id = $model_id AND corpus = $corpus
),
directed AS (
    SELECT *, 'dependent->head' AS direction, dependent_word AS from_word, head_word AS to_word
    FROM edges
    UNION ALL
    SELECT *, 'head->dependent', head_word, dependent_word
    FROM edges
    WHERE relation <> 'All'
)
SELECT
    d.word_mode,
    d.relation,
    h.layer,
    h.head,
    d.direction,
    d.example_id,
    count_if(h.target_word = d.to_word) AS accuracy_num,
    count(*) AS accuracy_den
FROM directed AS d
JOIN stg_relation_hits AS h
    ON h.model_id = d.model_id
    AND h.corpus = d.corpus
    AND h.example_id = d.example_id
    AND h.word_index = d.from_word
    AND h.word_mode = d.word_mode
WHERE h.model_id = $model_id AND h.corpus = $corpus
GROUP BY ALL;
