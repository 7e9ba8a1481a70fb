-- Clark §4.3 baselines: accuracy of each system's picked antecedent (coref_baseline_predictions)
-- over the coreferent mentions, per mention type and 'all' (materialized per partition in
-- agg_coref_baseline_accuracy; sql/aggregates/ says how). Right when the pick is one of the
-- mention's gold antecedents. ci_low / ci_high: 95% seeded bootstrap interval over the examples.
CREATE OR REPLACE VIEW int_coref_baseline_accuracy AS
SELECT
    model,
    model_id,
    corpus,
    system,
    mention_type,
    accuracy,
    accuracy_n::BIGINT AS n,
    accuracy_ci_low AS ci_low,
    accuracy_ci_high AS ci_high,
    n_examples
FROM stg_agg_coref_baseline_accuracy;
