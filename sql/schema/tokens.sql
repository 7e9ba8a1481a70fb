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
    segment TINYINT NOT NULL
);
-- The corpus word this piece belongs to (null for special tokens).
ALTER TABLE tokens ADD COLUMN IF NOT EXISTS word_index INTEGER;
