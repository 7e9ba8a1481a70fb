-- Clark et al. Table 1: per relation the best head and direction, against the best fixed
-- offset baseline, both over the same scored edges (n). Relations with fewer than 100 edges
-- are left out, as in the paper; 'All' is the best single head as a parser (UAS over
-- non-punctuation words). Relation names and readings (int_dependency_edges): UD names mapped
-- to SD; `case (UD)` is UD's case (preposition -> noun), pobj its SD reading (noun ->
-- preposition, so the directions swap), prep the preposition -> the noun's head.
-- BERT-base on WSJ: det 8-11 94.3 (baseline 51.7), dobj 8-10 86.8 (40.0), poss 7-6 80.5,
-- pobj 9-6 76.3 (34.6, offset -2), prep 7-4 66.7 (61.8).
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
        PARTITION BY model_id, corpus, word_mode, relation ORDER BY accuracy DESC, abs(baseline_offset), baseline_offset
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
    h.n,
    h.relative_depth
FROM best_head AS h
JOIN best_baseline AS b USING (model_id, corpus, word_mode, relation)
WHERE h.n >= 100
ORDER BY h.model_id, h.corpus, h.word_mode, h.relation = 'All' DESC, h.n DESC;
