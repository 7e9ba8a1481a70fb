-- Clark §3 corpus means of every head's attention summaries (int_head_attention_means), under two
-- weightings (mean_over, docs/methods.md §3.1): 'examples' (the default) is the mean of per-example
-- means, 'tokens' weights masses and entropies by query rows; sep_to_sep and cls_entropy are plain
-- means over examples under both. A materialized aggregate (storage/partition_writes.py write_aggregates,
-- in the facts' write transaction), filled per (model_id, corpus) by
-- sql/aggregates/agg_head_attention_means.sql: one row per (mean_over, layer, head); per measure m
-- its value (a ratio of sums over examples), its 95% seeded bootstrap interval over examples
-- (m_ci_low, m_ci_high; compute/bootstrap.py) and m_n, the sum of its denominator (examples with a
-- value under 'examples', their query rows under 'tokens').
CREATE TABLE IF NOT EXISTS agg_head_attention_means (
    model_id VARCHAR NOT NULL,
    corpus VARCHAR NOT NULL,
    layer SMALLINT NOT NULL,
    head SMALLINT NOT NULL,
    n_examples BIGINT NOT NULL,        -- examples with a row of the group
    to_cls DOUBLE,
    to_cls_ci_low DOUBLE,
    to_cls_ci_high DOUBLE,
    to_cls_n DOUBLE NOT NULL,
    to_sep DOUBLE,
    to_sep_ci_low DOUBLE,
    to_sep_ci_high DOUBLE,
    to_sep_n DOUBLE NOT NULL,
    to_punct DOUBLE,
    to_punct_ci_low DOUBLE,
    to_punct_ci_high DOUBLE,
    to_punct_n DOUBLE NOT NULL,
    to_self DOUBLE,
    to_self_ci_low DOUBLE,
    to_self_ci_high DOUBLE,
    to_self_n DOUBLE NOT NULL,
    to_prev DOUBLE,
    to_prev_ci_low DOUBLE,
    to_prev_ci_high DOUBLE,
    to_prev_n DOUBLE NOT NULL,
    to_next DOUBLE,
    to_next_ci_low DOUBLE,
    to_next_ci_high DOUBLE,
    to_next_n DOUBLE NOT NULL,
    sep_to_sep DOUBLE,
    sep_to_sep_ci_low DOUBLE,
    sep_to_sep_ci_high DOUBLE,
    sep_to_sep_n DOUBLE NOT NULL,
    entropy DOUBLE,
    entropy_ci_low DOUBLE,
    entropy_ci_high DOUBLE,
    entropy_n DOUBLE NOT NULL,
    cls_entropy DOUBLE,
    cls_entropy_ci_low DOUBLE,
    cls_entropy_ci_high DOUBLE,
    cls_entropy_n DOUBLE NOT NULL,
    uniform_entropy DOUBLE,
    uniform_entropy_ci_low DOUBLE,
    uniform_entropy_ci_high DOUBLE,
    uniform_entropy_n DOUBLE NOT NULL,
    n_queries DOUBLE NOT NULL
);
-- 'examples' or 'tokens'; rows written before the column existed have none, and are recomputed
-- (aggregate_version changes with this file)
ALTER TABLE agg_head_attention_means ADD COLUMN IF NOT EXISTS mean_over VARCHAR;
