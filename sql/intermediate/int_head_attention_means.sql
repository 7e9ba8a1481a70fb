-- Corpus-level mean of every head summary. Row masses are weighted by the number of
-- query rows they average, so each value is a mean over all query tokens of the corpus.
CREATE OR REPLACE VIEW int_head_attention_means AS
SELECT
    model,
    model_id,
    corpus,
    layer,
    head,
    count(*) AS n_examples,
    sum(n_tokens)::BIGINT AS n_queries,
    sum(to_cls * n_tokens) / sum(n_tokens) AS to_cls,
    sum(to_sep * n_tokens) / sum(n_tokens) AS to_sep,
    sum(to_punct * n_tokens) / sum(n_tokens) AS to_punct,
    sum(to_self * n_tokens) / sum(n_tokens) AS to_self,
    sum(to_prev * n_tokens) / sum(n_tokens) AS to_prev,
    sum(to_next * n_tokens) / sum(n_tokens) AS to_next,
    avg(sep_to_sep) AS sep_to_sep,
    sum(entropy * n_tokens) / sum(n_tokens) AS entropy,
    avg(cls_entropy) AS cls_entropy,
    -- entropy of a uniform row over the same tokens: log n
    sum(ln(n_tokens) * n_tokens) / sum(n_tokens) AS uniform_entropy,
    (layer - 0.5) / n_layers AS relative_depth
FROM stg_head_summaries
GROUP BY ALL;
