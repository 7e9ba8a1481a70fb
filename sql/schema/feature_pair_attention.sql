-- Kovaleva §4.5 token-to-token attention: per (example, pair, layer, head) the mean
-- word-level attention (a word's row = mean of its pieces' rows, to a word = sum over its
-- pieces) from every word of the first kind to every other word of the second kind in
-- the same segment (pair: verb_subject = verb -> subject, noun_pronoun = noun -> pronoun;
-- spaCy flags of word_features). Examples without such a pair have no row.
CREATE TABLE IF NOT EXISTS feature_pair_attention (
    model_id VARCHAR NOT NULL,
    corpus VARCHAR NOT NULL,
    example_id INTEGER NOT NULL,
    pair VARCHAR NOT NULL,
    layer SMALLINT NOT NULL,
    head SMALLINT NOT NULL,
    attention FLOAT NOT NULL,
    pairs INTEGER NOT NULL             -- word pairs averaged
);
