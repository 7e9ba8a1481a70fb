-- Corpus-level mean of every head summary (materialized per partition in agg_head_attention_means,
-- filled by sql/aggregates/agg_head_attention_means.sql). Row masses are weighted by the number
-- of query rows they average, so each value is a mean over all query tokens of the corpus.
-- <measure>_ci_low / _ci_high: its 95% seeded bootstrap interval over the examples.
CREATE OR REPLACE VIEW int_head_attention_means AS
SELECT
    model,
    model_id,
    corpus,
    layer,
    head,
    n_examples,
    n_queries::BIGINT AS n_queries,
    to_cls,
    to_sep,
    to_punct,
    to_self,
    to_prev,
    to_next,
    sep_to_sep,
    entropy,
    cls_entropy,
    uniform_entropy,
    (layer - 0.5) / n_layers AS relative_depth,
    COLUMNS('_ci_(low|high)$')
FROM stg_agg_head_attention_means;
