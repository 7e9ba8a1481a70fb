-- Clark §4.2 fixed-offset baselines per relation (int_dependency_offset_baselines); accuracy_n:
-- the edges. A materialized aggregate (storage/partition_writes.py write_aggregates, in the facts' write transaction), filled per
-- (model_id, corpus) by sql/aggregates/agg_dependency_offset_baselines.sql: per measure m its
-- value (a ratio of sums over examples), its 95% seeded bootstrap interval over examples
-- (m_ci_low, m_ci_high; compute/bootstrap.py) and m_n, the sum of its denominator.
CREATE TABLE IF NOT EXISTS agg_dependency_offset_baselines (
    model_id VARCHAR NOT NULL,
    corpus VARCHAR NOT NULL,
    word_mode VARCHAR NOT NULL,
    relation VARCHAR NOT NULL,
    baseline_offset INTEGER NOT NULL,
    n_examples BIGINT NOT NULL,        -- examples with a row of the group
    accuracy DOUBLE,
    accuracy_ci_low DOUBLE,
    accuracy_ci_high DOUBLE,
    accuracy_n DOUBLE NOT NULL
);
