-- Kovaleva §4.2 per head the per-sentence largest lexical-unit/frame-element attention averaged
-- over sentences, and the share of sentences above the model's 99th percentile p99. A materialized
-- aggregate (storage/partition_writes.py write_aggregates, in the facts' write transaction), filled per (model_id, corpus) by
-- sql/aggregates/agg_framenet_heads.sql: per measure m its value (a ratio of sums over examples),
-- its 95% seeded bootstrap interval over examples (m_ci_low, m_ci_high; compute/bootstrap.py) and
-- m_n, the sum of its denominator.
CREATE TABLE IF NOT EXISTS agg_framenet_heads (
    model_id VARCHAR NOT NULL,
    corpus VARCHAR NOT NULL,
    layer SMALLINT NOT NULL,
    head SMALLINT NOT NULL,
    p99 DOUBLE NOT NULL,
    n_examples BIGINT NOT NULL,        -- examples with a row of the group
    mean_max_attention DOUBLE,
    mean_max_attention_ci_low DOUBLE,
    mean_max_attention_ci_high DOUBLE,
    mean_max_attention_n DOUBLE NOT NULL,
    share_above_p99 DOUBLE,
    share_above_p99_ci_low DOUBLE,
    share_above_p99_ci_high DOUBLE,
    share_above_p99_n DOUBLE NOT NULL,
    n_links DOUBLE NOT NULL
);
