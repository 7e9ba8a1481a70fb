-- Kovaleva et al. §4.2, Fig. 3. Per sentence and head, the largest attention between the pieces
-- of a FrameNet lexical unit and those of one of its core frame elements (both directions; the
-- max over the sentence's links); per head, that value averaged over the sentences (not over
-- links: a sentence with several links counts once). The rule for `above_p99`: a head's mean is
-- above the 99th percentile (quantile_cont) of the distribution of the per-sentence values of
-- all of the model's heads ("greater than a 99-th percentile of the distribution of values for
-- all heads"), so a head is flagged only when its average beats what 1% of single
-- (sentence, head) readings reach, not merely for being the top of the head averages.
-- share_above_p99: the share of the head's sentences whose value is above that percentile.
-- Compare BERT-base: two heads at 0.201 and 0.209.
CREATE OR REPLACE VIEW kovaleva_framenet_heads AS
WITH per_sentence AS (
    SELECT model, model_id, corpus, example_id, layer, head, n_layers, max(max_attention) AS max_attention, count(*) AS n_links
    FROM stg_frame_link_attention
    GROUP BY ALL
),
cutoff AS (
    SELECT model_id, corpus, quantile_cont(max_attention, 0.99) AS p99
    FROM per_sentence
    GROUP BY ALL
)
SELECT
    s.model,
    s.model_id,
    s.corpus,
    s.layer,
    s.head,
    avg(s.max_attention) AS mean_max_attention,
    any_value(c.p99) AS p99,
    avg(s.max_attention) > any_value(c.p99) AS above_p99,
    avg((s.max_attention > c.p99)::INTEGER) AS share_above_p99,
    count(*) AS n_sentences,
    sum(s.n_links) AS n_links,
    (s.layer - 0.5) / s.n_layers AS relative_depth
FROM per_sentence AS s
JOIN cutoff AS c USING (model_id, corpus)
GROUP BY s.model, s.model_id, s.corpus, s.layer, s.head, s.n_layers;
