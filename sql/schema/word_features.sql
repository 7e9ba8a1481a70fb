-- spaCy annotation of corpus words, for corpora without gold syntax, with the Kovaleva
-- feature flags. spacy_alignment: exact (same span), split (the word is several spaCy
-- tokens; the syntactic head one is used), merged (a spaCy token spans more), none.
CREATE TABLE IF NOT EXISTS word_features (
    model_id VARCHAR NOT NULL,
    corpus VARCHAR NOT NULL,
    example_id INTEGER NOT NULL,
    word_index INTEGER NOT NULL,
    pos VARCHAR,
    tag VARCHAR,
    dep VARCHAR,
    head_word_index INTEGER,
    spacy_alignment VARCHAR NOT NULL,
    spacy_tokens VARCHAR,
    is_noun BOOLEAN,
    is_verb BOOLEAN,
    is_pronoun BOOLEAN,
    is_subject BOOLEAN,
    is_object BOOLEAN,
    is_negation BOOLEAN                -- one of the paper's 17 negation words
);
