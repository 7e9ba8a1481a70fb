-- Clark et al. Table 1: per relation the best head and direction, against the best fixed
-- offset baseline. Relations with fewer than 100 edges are left out, as in the paper;
-- 'All' is the best single head as a parser (UAS over non-punctuation words).
-- BERT-base on WSJ: det 8-11 94.3 (baseline 51.7), dobj 8-10 86.8 (40.0), poss 7-6 80.5,
-- pobj 9-6 76.3. pobj is UD `case` here: its baseline offset has the opposite sign.
CREATE OR REPLACE VIEW clark_dependency_heads AS
WITH best_head AS (
    SELECT *
    FROM int_dependency_head_accuracy
    QUALIFY row_number() OVER (
        PARTITION BY model_id, corpus, word_mode, relation ORDER BY accuracy DESC, layer, head, direction
    ) = 1
),
best_baseline AS (
    SELECT *
    FROM int_dependency_offset_baselines
    QUALIFY row_number() OVER (
        PARTITION BY model_id, corpus, relation ORDER BY accuracy DESC, abs(baseline_offset), baseline_offset
    ) = 1
)
SELECT
    h.model,
    h.model_id,
    h.corpus,
    h.word_mode,
    h.relation,
    h.layer,
    h.head,
    h.direction,
    h.accuracy,
    b.baseline_offset,
    b.accuracy AS baseline_accuracy,
    b.n
FROM best_head AS h
JOIN best_baseline AS b USING (model_id, corpus, relation)
WHERE b.n >= 100
ORDER BY h.model_id, h.corpus, h.relation = 'All' DESC, b.n DESC;
