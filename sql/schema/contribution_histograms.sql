-- Relative-position (sum, count) histograms of the HTA input contribution, in the shape
-- of position_histograms (kind = contribution) so the views treat both alike.
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
