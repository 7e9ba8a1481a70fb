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
