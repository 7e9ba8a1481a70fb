-- Clark §4.2 accuracy of every head per relation and direction over the scored edges
-- (int_dependency_head_accuracy); accuracy_n: the edges. A materialized aggregate
-- (storage/partition_writes.py write_aggregates, in the facts' write transaction), filled per (model_id, corpus) by
-- sql/aggregates/agg_dependency_head_accuracy.sql: per measure m its value (a ratio of sums over
-- examples), its 95% seeded bootstrap interval over examples (m_ci_low, m_ci_high;
-- compute/bootstrap.py) and m_n, the sum of its denominator.
CREATE TABLE IF NOT EXISTS agg_dependency_head_accuracy (
    model_id VARCHAR NOT NULL,
    corpus VARCHAR NOT NULL,
    word_mode VARCHAR NOT NULL,
    relation VARCHAR NOT NULL,
    layer SMALLINT NOT NULL,
    head SMALLINT NOT NULL,
    direction VARCHAR NOT NULL,
    n_examples BIGINT NOT NULL,        -- examples with a row of the group
    accuracy DOUBLE,
    accuracy_ci_low DOUBLE,
    accuracy_ci_high DOUBLE,
    accuracy_n DOUBLE NOT NULL
);
