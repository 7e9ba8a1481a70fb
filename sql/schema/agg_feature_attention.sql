-- Kovaleva §4.4 per feature type (or linked pair) and head: `received` the attention it receives
-- (pairs: the token-to-token attention), averaged over the examples with the feature; `from_cls`
-- the final layer's [CLS]-row weight (NULL on other layers and for pairs), `from_cls_per_length`
-- that weight divided by the example's length (Fig. 7's length-normalized reading). A materialized
-- aggregate (storage/partition_writes.py write_aggregates, in the facts' write transaction), filled per (model_id, corpus) by
-- sql/aggregates/agg_feature_attention.sql: per measure m its value (a ratio of sums over
-- examples), its 95% seeded bootstrap interval over examples (m_ci_low, m_ci_high;
-- compute/bootstrap.py) and m_n, the sum of its denominator.
CREATE TABLE IF NOT EXISTS agg_feature_attention (
    model_id VARCHAR NOT NULL,
    corpus VARCHAR NOT NULL,
    feature VARCHAR NOT NULL,
    layer SMALLINT NOT NULL,
    head SMALLINT NOT NULL,
    n_examples BIGINT NOT NULL,        -- examples with a row of the group
    received DOUBLE,
    received_ci_low DOUBLE,
    received_ci_high DOUBLE,
    received_n DOUBLE NOT NULL,
    from_cls DOUBLE,
    from_cls_ci_low DOUBLE,
    from_cls_ci_high DOUBLE,
    from_cls_n DOUBLE NOT NULL,
    from_cls_per_length DOUBLE,
    from_cls_per_length_ci_low DOUBLE,
    from_cls_per_length_ci_high DOUBLE,
    from_cls_per_length_n DOUBLE
);
-- rows written before the length-normalized reading lack its columns, and are recomputed
-- (aggregate_version changes with this file)
ALTER TABLE agg_feature_attention ADD COLUMN IF NOT EXISTS from_cls_per_length DOUBLE;
ALTER TABLE agg_feature_attention ADD COLUMN IF NOT EXISTS from_cls_per_length_ci_low DOUBLE;
ALTER TABLE agg_feature_attention ADD COLUMN IF NOT EXISTS from_cls_per_length_ci_high DOUBLE;
ALTER TABLE agg_feature_attention ADD COLUMN IF NOT EXISTS from_cls_per_length_n DOUBLE;
