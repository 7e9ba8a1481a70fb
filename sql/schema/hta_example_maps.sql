-- Pascual Fig. 7 / appendix C: the full attention, previous-layer and input contribution
-- maps of one example per Kovaleva pattern class (the example with the most heads of that
-- class by the rules of compute/metrics.py pattern_classes). query/key are 0-based token
-- positions; previous_layer and input are the contributions, normalized per query row.
CREATE TABLE IF NOT EXISTS hta_example_maps (
    model_id VARCHAR NOT NULL,
    corpus VARCHAR NOT NULL,
    example_id INTEGER NOT NULL,
    pattern VARCHAR NOT NULL,
    layer SMALLINT NOT NULL,
    head SMALLINT NOT NULL,
    query SMALLINT NOT NULL,
    key SMALLINT NOT NULL,
    attention FLOAT NOT NULL,
    previous_layer FLOAT NOT NULL,
    input FLOAT NOT NULL,
    hta_method VARCHAR NOT NULL
);
