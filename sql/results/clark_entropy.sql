-- Clark et al. Fig. 4: mean attention entropy per head, the [CLS]-row entropy (3.89 nats
-- in BERT-base's last layer) and the entropy a uniform head would have on the same inputs.
-- One row per head: the mean of per-example means (mean_over = 'examples', docs/methods.md §3.1,
-- as Clark's released code); the token-weighted means are int_head_attention_means' rows with
-- mean_over = 'tokens'.
-- <measure>_ci_low / _ci_high: 95% seeded bootstrap intervals over the examples.
CREATE OR REPLACE VIEW clark_entropy AS
SELECT
    model, model_id, corpus, layer, head, entropy, cls_entropy, uniform_entropy, n_examples, relative_depth,
    entropy_ci_low, entropy_ci_high, cls_entropy_ci_low, cls_entropy_ci_high, uniform_entropy_ci_low, uniform_entropy_ci_high,
    mean_over
FROM int_head_attention_means
WHERE mean_over = 'examples';
