-- Kovaleva Fig. 8: the fine-tuned model's validation score (in %) with one head attending
-- uniformly, against no head disabled; joined to that head's attention statistics in the
-- fine-tuned model on the same corpus (NULL until its attention facts are materialized), to
-- ask whether disabling a high-[SEP] or high-entropy head matters.
CREATE OR REPLACE VIEW kovaleva_head_ablation AS
SELECT
    a.* EXCLUDE (kind),
    h.to_cls,
    h.to_sep,
    h.to_punct,
    h.entropy,
    h.uniform_entropy
FROM stg_ablation_scores AS a
LEFT JOIN head_attention_means AS h
    ON h.model_id = a.tuned_model_id AND h.corpus = a.corpus AND h.layer = a.layer AND h.head = a.head
WHERE a.kind = 'head';
