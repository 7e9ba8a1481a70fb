-- Kovaleva et al. §4.4-4.5, Fig. 6: per head, the attention a feature type receives (max
-- over the example's tokens of that type of column sum / n, averaged over the examples
-- that have the type; punctuation included for Fig. 7's claim), and token-to-token attention
-- over linked pairs (feature verb->subject: a verb to its own subject by spaCy's dependency
-- head; noun->pronoun: a noun to a pronoun it is the gold antecedent of, only for corpora with
-- coreference): the mean over an example's linked pairs, averaged over examples with a pair.
-- A model fine-tuned on the task (int_finetuned_models) is `fine-tuned`, with the base
-- model's score of the same head beside its own; base_model_id is its base (a pre-trained
-- model: its own id), so the rows WHERE base_model_id = <base> hold both models per task.
-- Materialized per partition in agg_feature_attention (sql/aggregates/ says how); ci_low / ci_high:
-- the score's 95% seeded bootstrap interval over the examples.
CREATE OR REPLACE VIEW kovaleva_feature_attention AS
WITH scores AS (
    SELECT
        model,
        model_id,
        corpus,
        feature,
        layer,
        head,
        (layer - 0.5) / n_layers AS relative_depth,
        received AS score,
        received_n::BIGINT AS n_examples,
        received_ci_low AS ci_low,
        received_ci_high AS ci_high
    FROM stg_agg_feature_attention
),
links AS (
    SELECT base_model_id, base_model, corpus, tuned_model_id FROM int_finetuned_models
)
SELECT
    s.model,
    s.model_id,
    s.corpus,
    s.corpus AS task,
    s.feature,
    s.layer,
    s.head,
    s.score,
    s.n_examples,
    CASE WHEN l.base_model_id IS NULL THEN 'pre-trained' ELSE 'fine-tuned' END AS role,
    coalesce(l.base_model, s.model) AS base_model,
    coalesce(l.base_model_id, s.model_id) AS base_model_id,
    b.score AS base_score,
    s.relative_depth,
    s.ci_low,
    s.ci_high
FROM scores AS s
LEFT JOIN links AS l ON l.tuned_model_id = s.model_id AND l.corpus = s.corpus
LEFT JOIN scores AS b
    ON b.model_id = l.base_model_id
    AND b.corpus = s.corpus
    AND b.feature = s.feature
    AND b.layer = s.layer
    AND b.head = s.head;
