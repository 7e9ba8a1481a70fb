-- Kovaleva §4.4 feature types of every word piece: [CLS] / [SEP] from tokens.token_class,
-- noun, verb, pronoun, subject, object, negation from the spaCy flags of the piece's word, and
-- punctuation (§4.5: for STS-B, RTE and QNLI the final-layer [CLS] row attends most to
-- punctuation, "in a sense similar to [SEP]"): a '.' / ',' piece (token_class punct) or a piece of
-- a word spaCy tags PUNCT. One row per (token, feature it has).
CREATE OR REPLACE VIEW int_token_features AS
SELECT model_id, corpus, example_id, position, feature
FROM (
    UNPIVOT (
        SELECT
            t.model_id,
            t.corpus,
            t.example_id,
            t.position,
            t.token_class = 'cls' AS "[CLS]",
            t.token_class = 'sep' AS "[SEP]",
            coalesce(w.is_noun, false) AS noun,
            coalesce(w.is_verb, false) AS verb,
            coalesce(w.is_pronoun, false) AS pronoun,
            coalesce(w.is_subject, false) AS subject,
            coalesce(w.is_object, false) AS object,
            coalesce(w.is_negation, false) AS negation,
            t.token_class = 'punct' OR coalesce(w.pos = 'PUNCT', false) AS punctuation
        FROM stg_tokens AS t
        LEFT JOIN stg_word_features AS w USING (model_id, corpus, example_id, word_index)
    )
    ON "[CLS]", "[SEP]", noun, verb, pronoun, subject, object, negation, punctuation
    INTO NAME feature VALUE has_feature
)
WHERE has_feature;
