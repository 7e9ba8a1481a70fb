-- Clark §4.3 antecedent selection accuracy of every head per mention type and 'all'
-- (int_coref_head_accuracy); accuracy_n: the coreferent mentions scored. A materialized aggregate
-- (storage/partition_writes.py write_aggregates, in the facts' write transaction), filled per (model_id, corpus) by
-- sql/aggregates/agg_coref_head_accuracy.sql: per measure m its value (a ratio of sums over
-- examples), its 95% seeded bootstrap interval over examples (m_ci_low, m_ci_high;
-- compute/bootstrap.py) and m_n, the sum of its denominator.
CREATE TABLE IF NOT EXISTS agg_coref_head_accuracy (
    model_id VARCHAR NOT NULL,
    corpus VARCHAR NOT NULL,
    word_mode VARCHAR NOT NULL,
    layer SMALLINT NOT NULL,
    head SMALLINT NOT NULL,
    mention_type VARCHAR NOT NULL,
    n_examples BIGINT NOT NULL,        -- examples with a row of the group
    accuracy DOUBLE,
    accuracy_ci_low DOUBLE,
    accuracy_ci_high DOUBLE,
    accuracy_n DOUBLE NOT NULL
);
