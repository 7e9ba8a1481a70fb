-- Pascual relative-position histograms of attention and of the HTA input contribution (kind)
-- summed over the corpus's examples per head and offset (int_position_profiles). A materialized
-- aggregate (storage/partition_writes.py write_aggregates, in the facts' write transaction), filled per (model_id, corpus) by
-- sql/aggregates/agg_position_profiles.sql.
CREATE TABLE IF NOT EXISTS agg_position_profiles (
    model_id VARCHAR NOT NULL,
    corpus VARCHAR NOT NULL,
    kind VARCHAR NOT NULL,
    scope VARCHAR NOT NULL,
    layer SMALLINT NOT NULL,
    head SMALLINT NOT NULL,
    "offset" SMALLINT NOT NULL,
    weight_sum DOUBLE NOT NULL,
    pair_count BIGINT NOT NULL,
    value_max_normalized DOUBLE
);
