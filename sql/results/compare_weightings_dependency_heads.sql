-- Clark et al. Table 1 per weighting of the maps (docs/methods.md §3.9): per relation the best head
-- and direction when the most-attended word is read from the attention maps, from Kobayashi's
-- norm-weighted maps, or from Abnar and Zuidema's rollout (one map per layer, head 0), over the same
-- scored edges (n), beside the relation's best fixed-offset baseline. Relations with fewer than 100
-- edges are left out, as in clark_dependency_heads, whose best heads the attention rows repeat.
CREATE OR REPLACE VIEW compare_weightings_dependency_heads AS
WITH best_head AS (
    SELECT *
    FROM int_weighted_dependency_head_accuracy
    QUALIFY row_number() OVER (
        PARTITION BY model_id, corpus, weighting, word_mode, relation ORDER BY accuracy DESC, layer, head, direction
    ) = 1
),
best_baseline AS (
    SELECT model_id, corpus, word_mode, relation, baseline_offset, accuracy AS baseline_accuracy
    FROM int_dependency_offset_baselines
    QUALIFY row_number() OVER (
        PARTITION BY model_id, corpus, word_mode, relation ORDER BY accuracy DESC, abs(baseline_offset), baseline_offset
    ) = 1
)
SELECT
    h.model,
    h.model_id,
    h.corpus,
    h.weighting,
    h.word_mode,
    h.relation,
    h.layer,
    h.head,
    h.direction,
    h.accuracy,
    b.baseline_offset,
    b.baseline_accuracy,
    h.n,
    h.n_examples,
    h.relative_depth
FROM best_head AS h
LEFT JOIN best_baseline AS b USING (model_id, corpus, word_mode, relation)
WHERE h.n >= 100
ORDER BY h.model_id, h.corpus, h.word_mode, h.relation = 'All' DESC, h.n DESC, h.relation, h.weighting;
