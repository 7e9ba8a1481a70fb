-- Clark §4.2 fixed-offset baseline: the word `offset` positions from the dependent is
-- predicted as its head (+1: the word to the right), offsets -3..+3, for every relation and
-- 'All', over the same scored edges as the heads (int_dependency_scored_edges, so the same n);
-- materialized per partition in agg_dependency_offset_baselines (sql/aggregates/ says how).
CREATE OR REPLACE VIEW int_dependency_offset_baselines AS
SELECT
    model,
    model_id,
    corpus,
    word_mode,
    relation,
    baseline_offset,
    accuracy,
    accuracy_n::BIGINT AS n,
    accuracy_ci_low AS ci_low,
    accuracy_ci_high AS ci_high,
    n_examples
FROM stg_agg_dependency_offset_baselines;
