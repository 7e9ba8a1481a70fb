-- Per (example, scope, layer, head, offset) the sum of attention weights and the number of
-- (query, key) pairs at offset = key - query; offsets no pair of the example reaches have no row.
-- kind: always attention (the attention pass writes this table; the HTA input contribution has
-- the same shape in contribution_histograms, and int_position_histograms unions the two).
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
