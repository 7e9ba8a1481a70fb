-- Clark et al. Fig. 2: mean attention of each head to [CLS], [SEP], '.'/',' (top) and
-- from [SEP] to [SEP] (bottom). Compare to_sep in layers 6-10 of BERT-base (> 0.5).
-- One row per head: the mean of per-example means (mean_over = 'examples', docs/methods.md §3.1,
-- as Clark's released code); the token-weighted means are int_head_attention_means' rows with
-- mean_over = 'tokens'.
-- <measure>_ci_low / _ci_high: 95% seeded bootstrap intervals over the examples.
CREATE OR REPLACE VIEW clark_special_tokens AS
SELECT
    model, model_id, corpus, layer, head, to_cls, to_sep, to_punct, sep_to_sep, n_examples, relative_depth,
    to_cls_ci_low, to_cls_ci_high, to_sep_ci_low, to_sep_ci_high, to_punct_ci_low, to_punct_ci_high,
    sep_to_sep_ci_low, sep_to_sep_ci_high, mean_over
FROM int_head_attention_means
WHERE mean_over = 'examples';
