-- Kovaleva et al. §4.4-4.5, Fig. 6: per head, the attention a feature type receives (max
-- over the example's tokens of that type of column sum / n, averaged over the examples
-- that have the type; punctuation included for Fig. 7's claim), and token-to-token attention
-- over linked pairs (feature verb->subject: a verb to its own subject by spaCy's dependency
-- head; noun->pronoun: a noun to a pronoun it is the gold antecedent of, only for corpora with
-- coreference): the mean over an example's linked pairs, averaged over examples with a pair.
-- A model fine-tuned on the task (int_finetuned_models) is `fine-tuned`, with the base
-- model's score of the same head beside its own; base_model_id is its base (a pre-trained
-- model: its own id), so the rows WHERE base_model_id = <base> hold both models per task.
-- The means and roles: int_feature_attention_means; ci_low / ci_high: the score's 95% seeded
-- bootstrap interval over the examples.
CREATE OR REPLACE VIEW kovaleva_feature_attention AS
SELECT
    s.model,
    s.model_id,
    s.corpus,
    s.corpus AS task,
    s.feature,
    s.layer,
    s.head,
    s.received AS score,
    s.received_examples AS n_examples,
    s.role,
    s.base_model,
    s.base_model_id,
    b.received AS base_score,
    s.relative_depth,
    s.received_ci_low AS ci_low,
    s.received_ci_high AS ci_high
FROM int_feature_attention_means AS s
LEFT JOIN int_feature_attention_means AS b
    ON s.role = 'fine-tuned'
    AND b.model_id = s.base_model_id
    AND b.corpus = s.corpus
    AND b.feature = s.feature
    AND b.layer = s.layer
    AND b.head = s.head;
