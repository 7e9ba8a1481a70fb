-- Clark §4.2: accuracy of every head at every relation, in both directions, over the scored
-- edges (int_dependency_scored_edges). A hit is the attending word's most-attended other word
-- (relation_hits) being the other end of the edge: dependent -> head (the dependent's pick is
-- its head) or head -> dependent. The relation 'All' (every non-punctuation word's edge to its
-- head) is scored dependent -> head only, as a UAS.
CREATE OR REPLACE VIEW int_dependency_head_accuracy AS
WITH directed AS (
    SELECT *, 'dependent->head' AS direction, dependent_word AS from_word, head_word AS to_word
    FROM int_dependency_scored_edges
    UNION ALL
    SELECT *, 'head->dependent', head_word, dependent_word
    FROM int_dependency_scored_edges
    WHERE relation <> 'All'
)
SELECT
    d.model,
    d.model_id,
    d.corpus,
    d.word_mode,
    d.relation,
    h.layer,
    h.head,
    d.direction,
    avg((h.target_word = d.to_word)::INTEGER) AS accuracy,
    count(*) AS n,
    (h.layer - 0.5) / h.n_layers AS relative_depth
FROM directed AS d
JOIN stg_relation_hits AS h
    ON h.model_id = d.model_id
    AND h.corpus = d.corpus
    AND h.example_id = d.example_id
    AND h.word_index = d.from_word
    AND h.word_mode = d.word_mode
GROUP BY ALL;
