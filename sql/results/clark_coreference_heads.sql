-- Clark et al. Table 2: antecedent selection accuracy of the best head (by accuracy over
-- all mention types) and of the nearest, head-match and rule-based baselines, per mention
-- type and 'all'. BERT-base on CoNLL-2012: nearest 27 / 29 / 29 / 19, head match
-- 52 / 47 / 67 / 40, rule-based 69 / 70 / 77 / 60, head 5-4 65 / 64 / 73 / 58
-- (all / pronoun / proper / nominal). Every head: int_coref_head_accuracy.
-- ci_low / ci_high: each accuracy's 95% seeded bootstrap interval over the examples (n_examples);
-- beats_runner_up (the best head's rows; NULL for the baselines): over all mention types the best
-- head's ci_low is above the second-best head's ci_high, so its lead is beyond the intervals.
CREATE OR REPLACE VIEW clark_coreference_heads AS
WITH ranked AS (
    SELECT
        model_id,
        corpus,
        word_mode,
        layer,
        head,
        ci_low,
        ci_high,
        row_number() OVER (PARTITION BY model_id, corpus, word_mode ORDER BY accuracy DESC, layer, head) AS head_rank
    FROM int_coref_head_accuracy
    WHERE mention_type = 'all'
),
best_head AS (
    SELECT b.model_id, b.corpus, b.word_mode, b.layer, b.head, b.ci_low > u.ci_high AS beats_runner_up
    FROM ranked AS b
    LEFT JOIN ranked AS u ON u.model_id = b.model_id AND u.corpus = b.corpus AND u.word_mode = b.word_mode AND u.head_rank = 2
    WHERE b.head_rank = 1
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
        h.relative_depth,
        h.ci_low,
        h.ci_high,
        h.n_examples,
        best_head.beats_runner_up
    FROM int_coref_head_accuracy AS h
    JOIN best_head USING (model_id, corpus, word_mode, layer, head)
    UNION ALL
    SELECT model, model_id, corpus, system, mention_type, accuracy, n, NULL, NULL, NULL, NULL, ci_low, ci_high, n_examples, NULL
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
