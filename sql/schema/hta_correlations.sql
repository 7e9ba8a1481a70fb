-- Pascual §6-7: per (example, layer, head), the mean over query rows of the Pearson and
-- Spearman correlation between the attention row and the contribution row.
-- kind: previous_layer (contribution of the layer's input tokens) or input (of the
-- embedding output); hta_method: exact, estimate(k) or estimate(k,bf16), the run's method for
-- the input contribution (the previous-layer contribution is always exact), on every row.
CREATE TABLE IF NOT EXISTS hta_correlations (
    model_id VARCHAR NOT NULL,
    corpus VARCHAR NOT NULL,
    example_id INTEGER NOT NULL,
    layer SMALLINT NOT NULL,
    head SMALLINT NOT NULL,
    kind VARCHAR NOT NULL,
    pearson FLOAT,
    spearman FLOAT,
    hta_method VARCHAR NOT NULL
);
-- The example's query rows with a correlation (a constant or NaN row has none and is left out of
-- the example's mean, not the example): a corpus mean weights each example's mean by them, so
-- that every attention-contribution row pair of the corpus counts once (Pascual: "the mean of the
-- correlation values"). Null on rows written before it was recorded, which the means leave out.
ALTER TABLE hta_correlations ADD COLUMN IF NOT EXISTS n_rows SMALLINT;
