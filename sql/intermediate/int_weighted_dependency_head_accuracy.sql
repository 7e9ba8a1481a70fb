-- Clark §4.2's head accuracies (int_dependency_head_accuracy) per weighting of the maps
-- (docs/methods.md §3.9): the same scored edges (int_dependency_scored_edges) and the same hits
-- rule, the most-attended other word taken on the attention, norm-weighted or rollout maps
-- (stg_weighted_relation_hits; rollout has one map per layer, head 0). Computed when read, without
-- bootstrap intervals: for the attention rows, accuracy and n equal int_dependency_head_accuracy's.
CREATE OR REPLACE VIEW int_weighted_dependency_head_accuracy AS
WITH directed AS (
    SELECT *, 'dependent->head' AS direction, dependent_word AS from_word, head_word AS to_word
    FROM int_dependency_scored_edges
    UNION ALL
    SELECT *, 'head->dependent', head_word, dependent_word
    FROM int_dependency_scored_edges
    WHERE relation <> 'All'
)
SELECT
    h.model,
    h.model_id,
    h.corpus,
    h.weighting,
    d.word_mode,
    d.relation,
    h.layer,
    h.head,
    d.direction,
    count_if(h.target_word = d.to_word) / count(*) AS accuracy,
    count(*) AS n,
    count(DISTINCT d.example_id) AS n_examples,
    (h.layer - 0.5) / any_value(h.n_layers) AS relative_depth
FROM directed AS d
JOIN stg_weighted_relation_hits AS h
    ON h.model_id = d.model_id
    AND h.corpus = d.corpus
    AND h.example_id = d.example_id
    AND h.word_index = d.from_word
    AND h.word_mode = d.word_mode
GROUP BY h.model, h.model_id, h.corpus, h.weighting, d.word_mode, d.relation, h.layer, h.head, d.direction;
