-- Kovaleva Fig. 8: the fine-tuned model's validation score (in %) with one head attending
-- uniformly, against no head disabled; joined to that head's attention statistics in the
-- fine-tuned model on the same corpus (NULL until its attention facts are materialized), to
-- ask whether disabling a high-[SEP] or high-entropy head matters. The statistics are
-- int_head_attention_means' default rows, the mean of per-example means (mean_over =
-- 'examples', docs/methods.md §3.1; NULL where the statistics are).
CREATE OR REPLACE VIEW kovaleva_head_ablation AS
SELECT
    a.model,
    a.model_id,
    a.corpus,
    a.task,
    a.tuned_model_id,
    a.layer,
    a.head,
    a.metric,
    a.score,
    a.baseline_score,
    a.delta_vs_baseline,
    a.n_examples,
    h.to_cls,
    h.to_sep,
    h.to_punct,
    h.entropy,
    h.uniform_entropy,
    a.relative_depth,
    h.mean_over
FROM int_ablation_scores AS a
LEFT JOIN int_head_attention_means AS h
    ON h.model_id = a.tuned_model_id AND h.corpus = a.corpus AND h.layer = a.layer AND h.head = a.head
        AND h.mean_over = 'examples'
WHERE a.kind = 'head';
