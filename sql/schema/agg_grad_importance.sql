-- Clark Fig. 3 mean gradient magnitude per layer and target type: the mean over examples of each
-- example's mean over its heads and weights; grad_magnitude_n: the examples, n_weights: the
-- weights. A materialized aggregate (storage/partition_writes.py write_aggregates, in the facts' write
-- transaction), filled per (model_id, corpus) by sql/aggregates/agg_grad_importance.sql:
-- per measure m its value (a ratio of sums over examples), its 95% seeded bootstrap interval over
-- examples (m_ci_low, m_ci_high; compute/bootstrap.py) and m_n, the sum of its denominator.
CREATE TABLE IF NOT EXISTS agg_grad_importance (
    model_id VARCHAR NOT NULL,
    corpus VARCHAR NOT NULL,
    layer SMALLINT NOT NULL,
    target_type VARCHAR NOT NULL,
    loss_name VARCHAR NOT NULL,
    mask_probability FLOAT,
    seed INTEGER NOT NULL,
    n_examples BIGINT NOT NULL,        -- examples with a row of the group
    grad_magnitude DOUBLE,
    grad_magnitude_ci_low DOUBLE,
    grad_magnitude_ci_high DOUBLE,
    grad_magnitude_n DOUBLE NOT NULL,
    n_weights DOUBLE
);
-- warehouses made before the per-example means lack the column; apply_views then recomputes the rows
ALTER TABLE agg_grad_importance ADD COLUMN IF NOT EXISTS n_weights DOUBLE;
