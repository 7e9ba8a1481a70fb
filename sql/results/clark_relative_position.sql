-- Clark et al. §3.1: attention to the current, previous and next token; the paper finds
-- four heads above 0.5 on the previous token and five on the next in BERT-base.
-- One row per head: the mean of per-example means (mean_over = 'examples', docs/methods.md §3.1,
-- as Clark's released code); the token-weighted means are int_head_attention_means' rows with
-- mean_over = 'tokens'.
-- <measure>_ci_low / _ci_high: 95% seeded bootstrap intervals over the examples.
CREATE OR REPLACE VIEW clark_relative_position AS
SELECT
    model,
    model_id,
    corpus,
    layer,
    head,
    to_self,
    to_prev,
    to_next,
    to_prev > 0.5 AS mostly_previous,
    to_next > 0.5 AS mostly_next,
    n_examples,
    relative_depth,
    to_self_ci_low,
    to_self_ci_high,
    to_prev_ci_low,
    to_prev_ci_high,
    to_next_ci_low,
    to_next_ci_high,
    mean_over
FROM int_head_attention_means
WHERE mean_over = 'examples';
