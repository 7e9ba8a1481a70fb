-- Clark §4.2: accuracy of every head at every relation, in both directions, over the scored
-- edges (int_dependency_scored_edges), materialized per partition in agg_dependency_head_accuracy
-- (sql/aggregates/ says how). A hit is the attending word's most-attended other word
-- (relation_hits) being the other end of the edge: dependent -> head (the dependent's pick is its
-- head) or head -> dependent. The relation 'All' (every non-punctuation word's edge to its head) is
-- scored dependent -> head only, as a UAS. n: the edges; ci_low / ci_high: the accuracy's 95%
-- seeded bootstrap interval over the examples (n_examples of them).
CREATE OR REPLACE VIEW int_dependency_head_accuracy AS
SELECT
    model,
    model_id,
    corpus,
    word_mode,
    relation,
    layer,
    head,
    direction,
    accuracy,
    accuracy_n::BIGINT AS n,
    (layer - 0.5) / n_layers AS relative_depth,
    accuracy_ci_low AS ci_low,
    accuracy_ci_high AS ci_high,
    n_examples
FROM stg_agg_dependency_head_accuracy;
