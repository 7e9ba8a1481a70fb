-- Clark §4.2 fixed-offset baseline: the word `offset` positions from the dependent is
-- predicted as its head (+1: the word to the right), offsets -3..+3, for every relation and
-- 'All', over the same scored edges as the heads (int_dependency_scored_edges, so the same n).
CREATE OR REPLACE VIEW int_dependency_offset_baselines AS
WITH offsets AS (
    SELECT unnest([-3, -2, -1, 1, 2, 3]) AS baseline_offset
)
SELECT
    e.model,
    e.model_id,
    e.corpus,
    e.word_mode,
    e.relation,
    o.baseline_offset,
    avg((e.head_word - e.dependent_word = o.baseline_offset)::INTEGER) AS accuracy,
    count(*) AS n
FROM int_dependency_scored_edges AS e
CROSS JOIN offsets AS o
GROUP BY ALL;
