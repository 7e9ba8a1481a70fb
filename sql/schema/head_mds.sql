-- Clark Fig. 6: every head embedded in 2-D by metric MDS of the mean Jensen-Shannon divergence per
-- query token between heads (head_distances: js_sum / tokens), nats. Heads are 1-based.
CREATE TABLE IF NOT EXISTS head_mds (
    model_id VARCHAR NOT NULL,
    corpus VARCHAR NOT NULL,
    layer SMALLINT NOT NULL,
    head SMALLINT NOT NULL,
    x DOUBLE NOT NULL,
    y DOUBLE NOT NULL,
    stress DOUBLE NOT NULL             -- Kruskal's Stress-1 of the whole embedding (same on every row)
);
