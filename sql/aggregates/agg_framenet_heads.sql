-- Fills agg_framenet_heads for one (model_id, corpus): per (head, sentence) the largest attention
-- between the pieces of a FrameNet lexical unit and those of one of its core frame elements (both
-- directions, the max over the sentence's links), whether it is above p99, the 99th percentile
-- (quantile_cont) of these per-sentence values over all of the model's heads, and the links.
WITH per_sentence AS (
    SELECT example_id, layer, head, max(max_attention) AS max_attention, count(*) AS n_links
    FROM stg_frame_link_attention
    WHERE model_id = $model_id AND corpus = $corpus
    GROUP BY ALL
),
cutoff AS (
    SELECT quantile_cont(max_attention, 0.99) AS p99 FROM per_sentence
)
SELECT
    s.layer,
    s.head,
    c.p99,
    s.example_id,
    s.max_attention AS mean_max_attention_num,
    1 AS mean_max_attention_den,
    (s.max_attention > c.p99)::INTEGER AS share_above_p99_num,
    1 AS share_above_p99_den,
    s.n_links AS n_links_total
FROM per_sentence AS s
CROSS JOIN cutoff AS c;
