-- Fills agg_coref_head_accuracy for one (model_id, corpus): per (head, mention type and 'all',
-- example) the coreferent mentions a head gets right and how many there are. A head is right for
-- a mention when the mention's head word most attends (relation_hits) to the head word of one of
-- its antecedents (int_coref_antecedents). The join with relation_hits keeps the mentions whose
-- head word has hits: int_coref_scored_mentions, the baselines' mentions.
WITH judged AS (
    SELECT
        h.word_mode,
        h.layer,
        h.head,
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
    WHERE a.model_id = $model_id AND a.corpus = $corpus AND h.model_id = $model_id AND h.corpus = $corpus
    GROUP BY ALL
)
SELECT
    word_mode,
    layer,
    head,
    coalesce(mention_type, 'all') AS mention_type,
    example_id,
    count_if(correct) AS accuracy_num,
    count(*) AS accuracy_den
FROM judged
GROUP BY GROUPING SETS ((word_mode, layer, head, mention_type, example_id), (word_mode, layer, head, example_id));
