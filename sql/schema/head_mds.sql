-- Clark Fig. 6: every head embedded in 2-D by MDS of the mean Jensen-Shannon divergence per query
-- token between heads (head_distances: js_sum / tokens), nats: Kruskal's non-metric MDS (Clark §6
-- cites it; x, y keep the distances' rank order, their scale is arbitrary) unless metric_mds. Heads
-- are 1-based.
CREATE TABLE IF NOT EXISTS head_mds (
    model_id VARCHAR NOT NULL,
    corpus VARCHAR NOT NULL,
    layer SMALLINT NOT NULL,
    head SMALLINT NOT NULL,
    x DOUBLE NOT NULL,
    y DOUBLE NOT NULL,
    stress DOUBLE NOT NULL             -- Kruskal's Stress-1 of the whole embedding (same on every row;
                                       -- non-metric: against the monotone fit of the distances)
);
-- true: metric MDS (run config metric_mds), fitting the distances themselves; null: written before
-- the setting was recorded (such rows are metric).
ALTER TABLE head_mds ADD COLUMN IF NOT EXISTS metric_mds BOOLEAN;
