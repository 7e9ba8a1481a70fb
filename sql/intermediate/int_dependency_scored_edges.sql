-- The dependency edges Clark §4.2 scores, per word_mode: the edges of int_dependency_edges whose
-- two words both have relation hits (words without pieces, and examples the attention pass did
-- not keep, have none). Head accuracies and the offset baselines are both counted over exactly
-- these edges, so a relation's n is the same for every head, both directions and its baseline.
CREATE OR REPLACE VIEW int_dependency_scored_edges AS
WITH hit_words AS (
    SELECT DISTINCT model_id, corpus, example_id, word_index, word_mode
    FROM stg_relation_hits
    WHERE layer = 1 AND head = 1
)
SELECT e.*, d.word_mode
FROM int_dependency_edges AS e
JOIN hit_words AS d
    ON d.model_id = e.model_id
    AND d.corpus = e.corpus
    AND d.example_id = e.example_id
    AND d.word_index = e.dependent_word
JOIN hit_words AS h
    ON h.model_id = e.model_id
    AND h.corpus = e.corpus
    AND h.example_id = e.example_id
    AND h.word_index = e.head_word
    AND h.word_mode = d.word_mode;
