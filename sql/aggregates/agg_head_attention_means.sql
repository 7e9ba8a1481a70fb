-- Fills agg_head_attention_means for one (model_id, corpus): per (mean_over, layer, head,
-- example) the sums whose ratios over examples are the corpus means of int_head_attention_means
-- (docs/methods.md §3.1). Two weightings, each a group of its own (compute/bootstrap.py
-- summarize_units groups by every column but example_id and the sums):
--   mean_over = 'examples' (the default, Clark's released code): every example weighs the same,
--     the mean of per-example means (num = value, den = 1);
--   mean_over = 'tokens': row masses and entropies weighted by the example's query rows
--     (num = value * n_tokens, den = n_tokens), a mean over all query tokens of the corpus.
-- sep_to_sep and cls_entropy are one value per example: a plain mean over examples under both.
-- A NULL value counts in neither sum. n_queries is the corpus's query rows under both.
SELECT
    'examples' AS mean_over,
    layer,
    head,
    example_id,
    to_cls AS to_cls_num,
    (to_cls IS NOT NULL)::INTEGER AS to_cls_den,
    to_sep AS to_sep_num,
    (to_sep IS NOT NULL)::INTEGER AS to_sep_den,
    to_punct AS to_punct_num,
    (to_punct IS NOT NULL)::INTEGER AS to_punct_den,
    to_self AS to_self_num,
    (to_self IS NOT NULL)::INTEGER AS to_self_den,
    to_prev AS to_prev_num,
    (to_prev IS NOT NULL)::INTEGER AS to_prev_den,
    to_next AS to_next_num,
    (to_next IS NOT NULL)::INTEGER AS to_next_den,
    sep_to_sep AS sep_to_sep_num,
    (sep_to_sep IS NOT NULL)::INTEGER AS sep_to_sep_den,
    entropy AS entropy_num,
    (entropy IS NOT NULL)::INTEGER AS entropy_den,
    cls_entropy AS cls_entropy_num,
    (cls_entropy IS NOT NULL)::INTEGER AS cls_entropy_den,
    -- entropy of a uniform row over the same tokens: log n
    ln(n_tokens) AS uniform_entropy_num,
    1 AS uniform_entropy_den,
    n_tokens AS n_queries_total
FROM stg_head_summaries
WHERE model_id = $model_id AND corpus = $corpus
UNION ALL BY NAME
SELECT
    'tokens' AS mean_over,
    layer,
    head,
    example_id,
    to_cls * n_tokens AS to_cls_num,
    n_tokens * (to_cls IS NOT NULL)::INTEGER AS to_cls_den,
    to_sep * n_tokens AS to_sep_num,
    n_tokens * (to_sep IS NOT NULL)::INTEGER AS to_sep_den,
    to_punct * n_tokens AS to_punct_num,
    n_tokens * (to_punct IS NOT NULL)::INTEGER AS to_punct_den,
    to_self * n_tokens AS to_self_num,
    n_tokens * (to_self IS NOT NULL)::INTEGER AS to_self_den,
    to_prev * n_tokens AS to_prev_num,
    n_tokens * (to_prev IS NOT NULL)::INTEGER AS to_prev_den,
    to_next * n_tokens AS to_next_num,
    n_tokens * (to_next IS NOT NULL)::INTEGER AS to_next_den,
    sep_to_sep AS sep_to_sep_num,
    (sep_to_sep IS NOT NULL)::INTEGER AS sep_to_sep_den,
    entropy * n_tokens AS entropy_num,
    n_tokens * (entropy IS NOT NULL)::INTEGER AS entropy_den,
    cls_entropy AS cls_entropy_num,
    (cls_entropy IS NOT NULL)::INTEGER AS cls_entropy_den,
    ln(n_tokens) * n_tokens AS uniform_entropy_num,
    n_tokens AS uniform_entropy_den,
    n_tokens AS n_queries_total
FROM stg_head_summaries
WHERE model_id = $model_id AND corpus = $corpus;
