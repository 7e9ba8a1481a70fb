-- Pascual: relative-position (sum, count) histograms of the HTA input contribution, written by
-- the HTA asset. Columns mean what they mean in position_histograms.sql, except kind, always
-- contribution here, and hta_method, the method of the run (as in hta_correlations). A separate
-- table with the same columns, not rows of position_histograms: see int_position_histograms.sql.
CREATE TABLE IF NOT EXISTS contribution_histograms (
    model_id VARCHAR NOT NULL,
    corpus VARCHAR NOT NULL,
    example_id INTEGER NOT NULL,
    kind VARCHAR NOT NULL,
    scope VARCHAR NOT NULL,
    layer SMALLINT NOT NULL,
    head SMALLINT NOT NULL,
    "offset" SMALLINT NOT NULL,
    weight_sum FLOAT NOT NULL,
    pair_count INTEGER NOT NULL,
    hta_method VARCHAR NOT NULL
);
