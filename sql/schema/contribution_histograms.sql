-- Pascual: relative-position histograms of the HTA input contribution, written by the HTA
-- asset, in the dense grain of position_histograms.sql (one row per example, scope, layer and
-- head; the lists and their precision are documented there). hta_method: the method of the run
-- (as in hta_correlations). Its staged rows have kind = contribution. A separate table, not rows
-- of position_histograms: see int_position_histograms.sql.
CREATE TABLE IF NOT EXISTS contribution_histograms (
    model_id VARCHAR NOT NULL,
    corpus VARCHAR NOT NULL,
    example_id INTEGER NOT NULL,
    scope VARCHAR NOT NULL,
    layer SMALLINT NOT NULL,
    head SMALLINT NOT NULL,
    pair_counts SMALLINT[],
    one_plus_sqrt_mean_weights FLOAT[] NOT NULL,
    hta_method VARCHAR NOT NULL
);
