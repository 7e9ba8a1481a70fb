-- Kovaleva et al. Fig. 3: per head, the largest attention between the pieces of a FrameNet
-- lexical unit and those of its core frame element (both directions), averaged over the
-- links; heads above the 99th percentile (quantile_cont) of all of the model's heads.
-- Compare BERT-base: two heads at 0.201 and 0.209.
CREATE OR REPLACE VIEW kovaleva_framenet_heads AS
WITH per_head AS (
    SELECT model, model_id, corpus, layer, head, avg(max_attention) AS mean_max_attention, count(*) AS n_links
    FROM stg_frame_link_attention
    GROUP BY ALL
),
cutoff AS (
    SELECT model_id, corpus, quantile_cont(mean_max_attention, 0.99) AS p99
    FROM per_head
    GROUP BY ALL
)
SELECT
    h.model,
    h.model_id,
    h.corpus,
    h.layer,
    h.head,
    h.mean_max_attention,
    c.p99,
    h.mean_max_attention > c.p99 AS above_p99,
    h.n_links
FROM per_head AS h
JOIN cutoff AS c USING (model_id, corpus);
