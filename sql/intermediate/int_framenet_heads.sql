-- Kovaleva et al. §4.2, Fig. 3 (kovaleva_framenet_heads shows it; kovaleva_framenet_head_ablation joins it
-- to the head ablation). Per sentence and head, the largest attention between the pieces
-- of a FrameNet lexical unit and those of one of its core frame elements (both directions; the
-- max over the sentence's links); per head, that value averaged over the sentences (not over
-- links: a sentence with several links counts once). The rule for `above_p99` is the paper's:
-- "The maximum attention weights averaged over all data examples for these identified heads
-- account for 0.201 and 0.209, which are greater than a 99-th percentile of the distribution of
-- values for all heads": p99 is the 99th percentile (quantile_cont) of the per-head means of all
-- of the model's heads, so by construction about 1% of heads are flagged (the paper: 2 of 144).
-- above_p99_beyond_ci: the head's whole 95% interval (ci_low) is above that cutoff as well.
-- The stricter reading, kept as columns: sentence_p99, the 99th percentile of the single
-- (sentence, head) values of all heads; above_sentence_p99, the head's mean beats it;
-- share_above_sentence_p99, the share of the head's sentences whose value beats it.
-- Compare BERT-base: two heads at 0.201 and 0.209. Materialized per partition in
-- agg_framenet_heads (sql/aggregates/ says how). ci_low / ci_high: the mean's 95% seeded
-- bootstrap interval over the sentences; beats_runner_up (on the top head's row only, else NULL):
-- the top head's ci_low is above the second head's ci_high, so its lead is beyond the intervals.
CREATE OR REPLACE VIEW int_framenet_heads AS
WITH ranked AS (
    SELECT
        *,
        row_number() OVER (PARTITION BY model_id, corpus ORDER BY mean_max_attention DESC, layer, head) AS head_rank,
        quantile_cont(mean_max_attention, 0.99) OVER (PARTITION BY model_id, corpus) AS head_mean_p99
    FROM stg_agg_framenet_heads
),
runner_up AS (
    SELECT model_id, corpus, mean_max_attention_ci_high AS runner_up_ci_high FROM ranked WHERE head_rank = 2
)
SELECT
    r.model,
    r.model_id,
    r.corpus,
    r.layer,
    r.head,
    r.mean_max_attention,
    r.head_mean_p99 AS p99,
    r.mean_max_attention > r.head_mean_p99 AS above_p99,
    r.mean_max_attention_ci_low > r.head_mean_p99 AS above_p99_beyond_ci,
    r.p99::FLOAT AS sentence_p99,  -- quantile_cont of the FLOAT facts
    r.mean_max_attention > r.p99 AS above_sentence_p99,
    r.share_above_p99 AS share_above_sentence_p99,
    r.n_examples AS n_sentences,
    r.n_links::HUGEINT AS n_links,
    (r.layer - 0.5) / r.n_layers AS relative_depth,
    r.mean_max_attention_ci_low AS ci_low,
    r.mean_max_attention_ci_high AS ci_high,
    r.n_examples,
    CASE WHEN r.head_rank = 1 THEN r.mean_max_attention_ci_low > u.runner_up_ci_high END AS beats_runner_up
FROM ranked AS r
LEFT JOIN runner_up AS u USING (model_id, corpus);
