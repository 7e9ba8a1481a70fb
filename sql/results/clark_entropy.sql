-- Clark et al. Fig. 4: mean attention entropy per head, the [CLS]-row entropy (3.89 nats
-- in BERT-base's last layer) and the entropy a uniform head would have on the same inputs.
-- <measure>_ci_low / _ci_high: 95% seeded bootstrap intervals over the examples.
CREATE OR REPLACE VIEW clark_entropy AS
SELECT
    model, model_id, corpus, layer, head, entropy, cls_entropy, uniform_entropy, n_examples, relative_depth,
    entropy_ci_low, entropy_ci_high, cls_entropy_ci_low, cls_entropy_ci_high, uniform_entropy_ci_low, uniform_entropy_ci_high
FROM int_head_attention_means;
