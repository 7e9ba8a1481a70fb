-- Corpus-level mean of every head summary (materialized per partition in agg_head_attention_means,
-- filled by sql/aggregates/agg_head_attention_means.sql), two rows per head, one per weighting
-- (docs/methods.md §3.1):
--   mean_over = 'examples' (the default, Clark's released code): every example weighs the same,
--     the mean of per-example means;
--   mean_over = 'tokens': masses and entropies weighted by the query rows they average, so each
--     value is a mean over all query tokens of the corpus.
-- sep_to_sep and cls_entropy are one value per example, so both rows give their plain mean.
-- The results views (clark_special_tokens, clark_relative_position, clark_entropy,
-- kovaleva_head_ablation) and int_head_behaviours show the 'examples' rows; for the
-- token-weighted means select WHERE mean_over = 'tokens' here.
-- <measure>_ci_low / _ci_high: its 95% seeded bootstrap interval over the examples.
CREATE OR REPLACE VIEW int_head_attention_means AS
SELECT
    model,
    model_id,
    corpus,
    mean_over,
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
