-- Per (example, layer, head, offset) sum of weights and number of (query, key) pairs at
-- offset = key - query. kind: attention (contribution kinds share the table);
-- scope: all (every token) or content (special tokens neither query nor key).
CREATE TABLE IF NOT EXISTS position_histograms (
    model_id VARCHAR NOT NULL,
    corpus VARCHAR NOT NULL,
    example_id INTEGER NOT NULL,
    kind VARCHAR NOT NULL,
    scope VARCHAR NOT NULL,
    layer SMALLINT NOT NULL,
    head SMALLINT NOT NULL,
    "offset" SMALLINT NOT NULL,
    weight_sum FLOAT NOT NULL,
    pair_count INTEGER NOT NULL
);
