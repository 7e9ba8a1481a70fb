-- Clark §4.3: antecedent selection accuracy of every head, per mention type and 'all'. A
-- head is right for a coreferent mention when the mention's head word most attends
-- (relation_hits) to the head word of one of its antecedents.
CREATE OR REPLACE VIEW int_coref_head_accuracy AS
WITH judged AS (
    SELECT
        a.model,
        a.model_id,
        a.corpus,
        h.word_mode,
        h.layer,
        h.head,
        h.n_layers,
        a.example_id,
        a.mention_id,
        a.mention_type,
        bool_or(h.target_word = a.antecedent_head_word) AS correct
    FROM int_coref_antecedents AS a
    JOIN stg_relation_hits AS h
        ON h.model_id = a.model_id
        AND h.corpus = a.corpus
        AND h.example_id = a.example_id
        AND h.word_index = a.head_word
    GROUP BY ALL
)
SELECT
    model,
    model_id,
    corpus,
    word_mode,
    layer,
    head,
    coalesce(mention_type, 'all') AS mention_type,
    avg(correct::INTEGER) AS accuracy,
    count(*) AS n,
    (layer - 0.5) / n_layers AS relative_depth
FROM judged
GROUP BY GROUPING SETS (
    (model, model_id, corpus, word_mode, layer, head, n_layers, mention_type),
    (model, model_id, corpus, word_mode, layer, head, n_layers)
);
