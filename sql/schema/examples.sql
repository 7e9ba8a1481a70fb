-- One row per example of a corpus as encoded for one model (lengths depend on the tokenizer).
CREATE TABLE IF NOT EXISTS examples (
    model_id VARCHAR NOT NULL,
    corpus VARCHAR NOT NULL,
    example_id INTEGER NOT NULL,       -- stable across runs (row id in the source files)
    source_ref VARCHAR,                -- human-readable origin: split:row, article § section ¶n
    text_a VARCHAR NOT NULL,
    text_b VARCHAR,
    n_tokens SMALLINT NOT NULL,        -- including special tokens
    max_len SMALLINT NOT NULL,
    seed INTEGER NOT NULL
);
-- Columns added with the corpora layer (kept as ALTERs so older warehouse files upgrade).
ALTER TABLE examples ADD COLUMN IF NOT EXISTS split VARCHAR;            -- validation / train / test
ALTER TABLE examples ADD COLUMN IF NOT EXISTS label DOUBLE;             -- numeric label or score
ALTER TABLE examples ADD COLUMN IF NOT EXISTS label_text VARCHAR;       -- label name (entailment...)
ALTER TABLE examples ADD COLUMN IF NOT EXISTS group_id INTEGER;         -- parallel rows / one document
-- Examples over max_len pieces: `drop` (not kept) or `truncate` (cut to max_len, Clark §3);
-- truncated_from is the example's length before the cut (null when it fit).
ALTER TABLE examples ADD COLUMN IF NOT EXISTS overlong VARCHAR;
ALTER TABLE examples ADD COLUMN IF NOT EXISTS truncated_from SMALLINT;
