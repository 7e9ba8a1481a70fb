-- Gold coreference mentions. Word spans are [word_start, word_end) in corpus words of the
-- example (a window of whole sentences of a document, at most max_len pieces).
-- head_word: the word whose dependency head lies outside the mention (last word when the
-- format has no tree). GAP rows add role (pronoun / A / B) and the gold flag; there the pronoun
-- is cluster P, joined by the candidates that corefer with it (others are clusters A / B), and
-- mention_type is pronoun for the pronoun and proper for the candidates.
CREATE TABLE IF NOT EXISTS coref_mentions (
    model_id VARCHAR NOT NULL,
    corpus VARCHAR NOT NULL,
    example_id INTEGER NOT NULL,
    mention_id INTEGER NOT NULL,
    cluster_id VARCHAR NOT NULL,       -- the document's entity id
    word_start INTEGER NOT NULL,
    word_end INTEGER NOT NULL,
    head_word INTEGER NOT NULL,
    mention_type VARCHAR NOT NULL,     -- pronoun | proper | nominal (by the head's UPOS)
    is_discontinuous BOOLEAN NOT NULL, -- parts [k/n] merged into one span
    role VARCHAR,                      -- GAP only
    gold_coref BOOLEAN                 -- GAP only: candidate corefers with the pronoun
);
-- Added for the coreference baselines (kept as an ALTER so older warehouse files upgrade):
-- the head word's PTB tag (XPOS), null where the format has none (GAP).
ALTER TABLE coref_mentions ADD COLUMN IF NOT EXISTS head_xpos VARCHAR;
