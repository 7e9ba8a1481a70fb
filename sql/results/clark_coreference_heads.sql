-- Clark et al. Table 2: antecedent selection accuracy of the best head (by accuracy over
-- all mention types) and of the nearest, head-match and rule-based baselines, per mention
-- type and 'all'. BERT-base on CoNLL-2012: nearest 27 / 29 / 29 / 19, head match
-- 52 / 47 / 67 / 40, rule-based 69 / 70 / 77 / 60, head 5-4 65 / 64 / 73 / 58
-- (all / pronoun / proper / nominal). Every head: int_coref_head_accuracy.
CREATE OR REPLACE VIEW clark_coreference_heads AS
WITH best_head AS (
    SELECT model_id, corpus, word_mode, layer, head
    FROM int_coref_head_accuracy
    WHERE mention_type = 'all'
    QUALIFY row_number() OVER (PARTITION BY model_id, corpus, word_mode ORDER BY accuracy DESC, layer, head) = 1
),
systems AS (
    SELECT
        h.model,
        h.model_id,
        h.corpus,
        'head ' || h.layer || '-' || h.head AS system,
        h.mention_type,
        h.accuracy,
        h.n,
        h.word_mode,
        h.layer,
        h.head,
        h.relative_depth
    FROM int_coref_head_accuracy AS h
    JOIN best_head USING (model_id, corpus, word_mode, layer, head)
    UNION ALL
    SELECT model, model_id, corpus, system, mention_type, accuracy, n, NULL, NULL, NULL, NULL
    FROM int_coref_baseline_accuracy
)
SELECT *
FROM systems
ORDER BY
    model_id,
    corpus,
    layer IS NOT NULL,
    list_position(['nearest', 'head match', 'rule-based'], system),
    list_position(['all', 'pronoun', 'proper', 'nominal'], mention_type);
