-- Head correspondence between two models (compute/compare/head_matching.py): the mean
-- Jensen-Shannon distance (natural log, scipy's jensenshannon: sqrt of the divergence, 0 to
-- sqrt(ln 2)) between a head of the partition's model and a head of another registered model,
-- over the word-level attention rows (each word's attention to the shared words, plus the rest)
-- of the examples of the corpus both models have. One row per (head, other head); heads 1-based.
CREATE TABLE IF NOT EXISTS head_matches (
    model_id VARCHAR NOT NULL,
    corpus VARCHAR NOT NULL,
    other_model_id VARCHAR NOT NULL,   -- the model compared with
    layer SMALLINT NOT NULL,
    head SMALLINT NOT NULL,
    other_layer SMALLINT NOT NULL,
    other_head SMALLINT NOT NULL,
    js_distance DOUBLE NOT NULL,       -- mean over the word rows
    n_examples INTEGER NOT NULL,       -- shared examples compared
    n_words BIGINT NOT NULL            -- word rows (words with pieces in both models) averaged over
);
