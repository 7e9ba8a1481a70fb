-- Clark §4.3: antecedent selection accuracy of every head, per mention type and 'all'
-- (materialized per partition in agg_coref_head_accuracy; sql/aggregates/ says how). A head is
-- right for a coreferent mention when the mention's head word most attends (relation_hits) to the
-- head word of one of its antecedents. n: the mentions; ci_low / ci_high: the accuracy's 95%
-- seeded bootstrap interval over the examples (n_examples of them).
CREATE OR REPLACE VIEW int_coref_head_accuracy AS
SELECT
    model,
    model_id,
    corpus,
    word_mode,
    layer,
    head,
    mention_type,
    accuracy,
    accuracy_n::BIGINT AS n,
    (layer - 0.5) / n_layers AS relative_depth,
    accuracy_ci_low AS ci_low,
    accuracy_ci_high AS ci_high,
    n_examples
FROM stg_agg_coref_head_accuracy;
