-- One row per word piece of an encoded example.
CREATE TABLE IF NOT EXISTS tokens (
    model_id VARCHAR NOT NULL,
    corpus VARCHAR NOT NULL,
    example_id INTEGER NOT NULL,
    position SMALLINT NOT NULL,        -- 0-based piece index, [CLS] is 0
    token_id BIGINT NOT NULL,
    token VARCHAR NOT NULL,
    token_class VARCHAR NOT NULL,      -- cls | sep | punct ('.' or ',') | special | other
    is_special BOOLEAN NOT NULL,
    segment TINYINT NOT NULL           -- token type id; for models without token types, 1 after the first separator
);
-- The corpus word holding this piece's last character (null for special tokens and for pieces
-- inside no word, such as a bare SentencePiece space).
ALTER TABLE tokens ADD COLUMN IF NOT EXISTS word_index INTEGER;
