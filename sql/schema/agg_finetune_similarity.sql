-- Kovaleva Fig. 5 per head the cosine of base and fine-tuned attention maps averaged over
-- examples. A materialized aggregate (storage/partition_writes.py write_aggregates, in the facts' write transaction), filled per
-- (model_id, corpus) by sql/aggregates/agg_finetune_similarity.sql: per measure m its value (a
-- ratio of sums over examples), its 95% seeded bootstrap interval over examples (m_ci_low,
-- m_ci_high; compute/bootstrap.py) and m_n, the sum of its denominator.
CREATE TABLE IF NOT EXISTS agg_finetune_similarity (
    model_id VARCHAR NOT NULL,
    corpus VARCHAR NOT NULL,
    tuned_model_id VARCHAR NOT NULL,
    tuned_model VARCHAR NOT NULL,
    layer SMALLINT NOT NULL,
    head SMALLINT NOT NULL,
    n_examples BIGINT NOT NULL,        -- examples with a row of the group
    cosine DOUBLE,
    cosine_ci_low DOUBLE,
    cosine_ci_high DOUBLE,
    cosine_n DOUBLE NOT NULL
);
