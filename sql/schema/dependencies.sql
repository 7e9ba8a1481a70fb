-- Gold UD dependencies, one row per syntactic word; word indices are surface words
-- (both halves of a multiword token such as "don't" map to the same surface word).
CREATE TABLE IF NOT EXISTS dependencies (
    model_id VARCHAR NOT NULL,
    corpus VARCHAR NOT NULL,
    example_id INTEGER NOT NULL,
    ud_id SMALLINT NOT NULL,           -- the CoNLL-U word id
    word_index INTEGER NOT NULL,       -- dependent, as a surface word
    head_word_index INTEGER,           -- null for the root
    relation VARCHAR NOT NULL,         -- UD relation (the Clark view maps it to the paper's)
    upos VARCHAR,
    xpos VARCHAR,
    form VARCHAR
);
