-- Packs relation hits of the flat grain (one per example, word, layer and head, with word_index
-- and target_word: the rows of stg_relation_hits, and of relation_hits before the dense grain)
-- from the relation `flat_rows` into the dense rows of sql/schema/relation_hits.sql: one per
-- (example, layer, head, and every other column), target_words indexed by word_index, NULL for a
-- word the rows skip. storage/dense_grain.py runs it.
SELECT
    COLUMNS(c -> c NOT IN ('last_word', 'words', 'targets')),
    CASE
        WHEN len(words) = last_word + 1 THEN targets
        ELSE list_transform(range(0, last_word + 1), w -> targets[list_position(words, w)])
    END::SMALLINT[] AS target_words
FROM (
    SELECT
        COLUMNS(c -> c NOT IN ('word_index', 'target_word')),
        max(word_index)::BIGINT AS last_word,
        list(word_index ORDER BY word_index) AS words,
        list(target_word ORDER BY word_index) AS targets
    FROM flat_rows
    GROUP BY ALL
)
