-- Relation hits (Clark §4, METHODS §3): per (example, word, layer, head) the most-attended
-- other word of the word-level map, special tokens excluded, ties to the lower index.
-- Dependency and coreference accuracies are joins of this table with the gold tables.
-- word_mode: how a split word's row is formed from its pieces' rows (mean | first | max).
CREATE TABLE IF NOT EXISTS relation_hits (
    model_id VARCHAR NOT NULL,
    corpus VARCHAR NOT NULL,
    example_id INTEGER NOT NULL,
    word_index INTEGER NOT NULL,       -- the attending word (0-based, as in `words`)
    layer SMALLINT NOT NULL,
    head SMALLINT NOT NULL,
    target_word INTEGER NOT NULL,      -- its most-attended other word
    word_mode VARCHAR NOT NULL
);
