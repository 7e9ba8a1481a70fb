-- The coreferent mentions Clark §4.3 scores: those of int_coref_antecedents whose head word has
-- relation hits (a word without pieces, or an example the attention pass did not keep, has
-- none, so no head can be judged on it). Heads and baselines are both judged over exactly these
-- mentions, so Table 2 compares them on the same n.
CREATE OR REPLACE VIEW int_coref_scored_mentions AS
WITH hit_words AS (
    SELECT DISTINCT model_id, corpus, example_id, word_index
    FROM stg_relation_hits
    WHERE layer = 1 AND head = 1
)
SELECT DISTINCT a.model, a.model_id, a.corpus, a.example_id, a.mention_id, a.mention_type, a.head_word
FROM int_coref_antecedents AS a
JOIN hit_words AS w
    ON w.model_id = a.model_id
    AND w.corpus = a.corpus
    AND w.example_id = a.example_id
    AND w.word_index = a.head_word;
