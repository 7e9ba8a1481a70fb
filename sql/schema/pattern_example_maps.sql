-- Kovaleva Fig. 2: a few cropped attention maps per pattern class (each from a different
-- example: the first heads of that class in the pass, shortest examples first), so a
-- person can judge the classification rules. query/key are 0-based token positions.
CREATE TABLE IF NOT EXISTS pattern_example_maps (
    model_id VARCHAR NOT NULL,
    corpus VARCHAR NOT NULL,
    example_id INTEGER NOT NULL,
    pattern VARCHAR NOT NULL,
    layer SMALLINT NOT NULL,
    head SMALLINT NOT NULL,
    query SMALLINT NOT NULL,
    key SMALLINT NOT NULL,
    attention FLOAT NOT NULL
);
