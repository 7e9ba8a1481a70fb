-- Kovaleva Fig. 2 share of each pattern class among the corpus's (example, layer, head) maps;
-- maps: how many fell into the class. A materialized aggregate (storage/partition_writes.py
-- write_aggregates, in the facts' write transaction), filled per (model_id, corpus) by sql/aggregates/agg_pattern_shares.sql: per
-- measure m its value (a ratio of sums over examples), its 95% seeded bootstrap interval over
-- examples (m_ci_low, m_ci_high; compute/bootstrap.py) and m_n, the sum of its denominator.
CREATE TABLE IF NOT EXISTS agg_pattern_shares (
    model_id VARCHAR NOT NULL,
    corpus VARCHAR NOT NULL,
    pattern VARCHAR NOT NULL,
    pattern_order INTEGER NOT NULL,
    n_examples BIGINT NOT NULL,        -- examples with a row of the group
    share DOUBLE,
    share_ci_low DOUBLE,
    share_ci_high DOUBLE,
    share_n DOUBLE NOT NULL,
    maps DOUBLE NOT NULL
);
