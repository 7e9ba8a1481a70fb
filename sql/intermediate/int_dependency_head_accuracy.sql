-- Clark §4.2: accuracy of every head at every relation, in both directions. A hit is the
-- attending word's most-attended other word (relation_hits) being the other end of the
-- edge: dependent -> head (the dependent's pick is its head) or head -> dependent. The
-- relation 'All' pools every edge except punctuation, dependent -> head, as a UAS.
CREATE OR REPLACE VIEW int_dependency_head_accuracy AS
WITH labelled AS (
    SELECT model, model_id, corpus, example_id, dependent_word, head_word, relation FROM int_dependency_edges
    UNION ALL
    SELECT model, model_id, corpus, example_id, dependent_word, head_word, 'All'
    FROM int_dependency_edges
    WHERE upos <> 'PUNCT'
),
directed AS (
    SELECT *, 'dependent->head' AS direction, dependent_word AS from_word, head_word AS to_word FROM labelled
    UNION ALL
    SELECT *, 'head->dependent', head_word, dependent_word FROM labelled WHERE relation <> 'All'
)
SELECT
    d.model,
    d.model_id,
    d.corpus,
    h.word_mode,
    d.relation,
    h.layer,
    h.head,
    d.direction,
    avg((h.target_word = d.to_word)::INTEGER) AS accuracy,
    count(*) AS n
FROM directed AS d
JOIN stg_relation_hits AS h
    ON h.model_id = d.model_id AND h.corpus = d.corpus AND h.example_id = d.example_id AND h.word_index = d.from_word
GROUP BY ALL;
