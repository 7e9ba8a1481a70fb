-- Clark §4.2 fixed-offset baseline: the word `offset` positions from the dependent is
-- predicted as its head (+1: the word to the right), offsets -3..+3, for every relation
-- and for 'All' (every non-punctuation edge).
CREATE OR REPLACE VIEW int_dependency_offset_baselines AS
WITH labelled AS (
    SELECT model, model_id, corpus, relation, head_word - dependent_word AS distance FROM int_dependency_edges
    UNION ALL
    SELECT model, model_id, corpus, 'All', head_word - dependent_word FROM int_dependency_edges WHERE upos <> 'PUNCT'
),
offsets AS (
    SELECT unnest([-3, -2, -1, 1, 2, 3]) AS baseline_offset
)
SELECT
    l.model,
    l.model_id,
    l.corpus,
    l.relation,
    o.baseline_offset,
    avg((l.distance = o.baseline_offset)::INTEGER) AS accuracy,
    count(*) AS n
FROM labelled AS l
CROSS JOIN offsets AS o
GROUP BY ALL;
