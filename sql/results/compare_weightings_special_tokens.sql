-- Clark et al. Figs. 2 and 4 per weighting of the maps, side by side (docs/methods.md §3.9): per
-- layer the mean share of each row's mass on [CLS], on [SEP], on both, on '.'/',' and the mean row
-- entropy, under attention, Kobayashi's norm weighting (alpha_ij ||f_h(x_j)||, rows renormalized) and
-- Abnar and Zuidema's rollout (one map per layer, head 0). A layer's value is the mean over its heads
-- of each head's mean over examples (the examples weigh the same, as in clark_special_tokens); for
-- rollout, the one map's mean. Kobayashi et al. report that the attention [CLS] and [SEP] receive
-- comes with small value norms: the norm rows then put much less mass on them.
CREATE OR REPLACE VIEW compare_weightings_special_tokens AS
WITH per_head AS (
    SELECT
        model,
        model_id,
        corpus,
        weighting,
        layer,
        head,
        avg(to_cls) AS to_cls,
        avg(to_sep) AS to_sep,
        avg(to_cls + to_sep) AS to_cls_sep,
        avg(to_punct) AS to_punct,
        avg(entropy) AS entropy,
        count(*) AS n_examples,
        any_value(n_layers) AS n_layers
    FROM stg_weighted_head_summaries
    GROUP BY model, model_id, corpus, weighting, layer, head
)
SELECT
    model,
    model_id,
    corpus,
    weighting,
    layer,
    avg(to_cls) AS to_cls,
    avg(to_sep) AS to_sep,
    avg(to_cls_sep) AS to_cls_sep,
    avg(to_punct) AS to_punct,
    avg(entropy) AS entropy,
    count(*) AS n_heads,
    max(n_examples) AS n_examples,
    (layer - 0.5) / any_value(n_layers) AS relative_depth
FROM per_head
GROUP BY model, model_id, corpus, weighting, layer
ORDER BY model_id, corpus, weighting, layer;
