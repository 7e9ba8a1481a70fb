-- Relation hits (Clark §4, docs/methods.md §3): per (example, word, layer, head) the most-attended
-- other word of the word-level map, special tokens excluded, ties to the lower index.
-- Dependency and coreference accuracies are joins of this table with the gold tables, through
-- stg_relation_hits, which unnests the dense rows below to one row per (example, word, layer,
-- head) with word_index and target_word.
-- Stored dense: one row per (example, layer, head); target_words[i] (1-based) is the target of
-- the word with word_index i - 1 (as in `words`), NULL for a word without pieces.
-- word_mode: how a split word's row is formed from its pieces' rows (mean | first | max).
CREATE TABLE IF NOT EXISTS relation_hits (
    model_id VARCHAR NOT NULL,
    corpus VARCHAR NOT NULL,
    example_id INTEGER NOT NULL,
    layer SMALLINT NOT NULL,
    head SMALLINT NOT NULL,
    target_words SMALLINT[] NOT NULL,
    word_mode VARCHAR NOT NULL
);
-- What the maps are (docs/methods.md §3.9): attention, norm or rollout (one map per layer, head = 0);
-- rows written before this column are attention's. stg_relation_hits shows the attention rows,
-- stg_weighted_relation_hits them all.
ALTER TABLE relation_hits ADD COLUMN IF NOT EXISTS weighting VARCHAR DEFAULT 'attention';
