-- Kovaleva §4.5 token-to-token attention: per (example, pair, layer, head) the mean
-- word-level attention (a word's row = mean of its pieces' rows, to a word = sum over its
-- pieces) over the example's linked pairs (attention_facts.feature_pair_links): verb_subject
-- = a verb -> its own subject (spaCy dependency head of word_features), noun_pronoun = a noun
-- -> a pronoun it is the nearest noun antecedent of (gold coref_mentions; corpora without
-- coreference have none). Examples without such a pair have no row.
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
