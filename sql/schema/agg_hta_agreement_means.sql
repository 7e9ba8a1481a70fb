-- The agreement of each weighting's map, per layer or rolled out (aggregation), with HTA's input
-- contribution per layer, averaged over examples: the mean of the examples' mean row Spearman (spearman_n:
-- the examples with one), n_rows: the query rows behind them. A materialized aggregate
-- (storage/partition_writes.py write_aggregates, in the facts' write transaction), filled per (model_id,
-- corpus) by sql/aggregates/agg_hta_agreement_means.sql: per measure m its value (a ratio of sums over
-- examples), its 95% seeded bootstrap interval over examples (m_ci_low, m_ci_high; compute/bootstrap.py)
-- and m_n, the sum of its denominator.
CREATE TABLE IF NOT EXISTS agg_hta_agreement_means (
    model_id VARCHAR NOT NULL,
    corpus VARCHAR NOT NULL,
    weighting VARCHAR NOT NULL,
    aggregation VARCHAR NOT NULL,      -- per_layer | rolled_out
    hta_method VARCHAR NOT NULL,
    layer SMALLINT NOT NULL,
    n_examples BIGINT NOT NULL,        -- examples with a row of the group
    spearman DOUBLE,
    spearman_ci_low DOUBLE,
    spearman_ci_high DOUBLE,
    spearman_n DOUBLE NOT NULL,
    n_rows DOUBLE
);
-- rows computed before the aggregation column compared the rolled-out maps
ALTER TABLE agg_hta_agreement_means ADD COLUMN IF NOT EXISTS aggregation VARCHAR DEFAULT 'rolled_out';
