-- Head correspondence: for each head of a model, its nearest head (smallest mean
-- Jensen-Shannon distance of word-level attention rows, head_matches) in every other model with
-- shared examples of the corpus, with both heads' relative depth ((layer - 0.5) / n_layers), so a
-- 6-layer and a 12-layer model line up. A pair computed in one direction only (by the run of one
-- of the two models) is read in both: the distance is symmetric. `runner_up_distance` is the
-- second-nearest head's distance (how clear the match is).
CREATE OR REPLACE VIEW compare_head_matches AS
WITH both_directions AS (
    SELECT
        model, model_id, corpus, other_model, other_model_id, layer, head, n_layers,
        other_layer, other_head, other_n_layers, js_distance, n_examples, n_words
    FROM stg_head_matches
    UNION ALL
    SELECT
        s.other_model, s.other_model_id, s.corpus, s.model, s.model_id, s.other_layer, s.other_head,
        s.other_n_layers, s.layer, s.head, s.n_layers, s.js_distance, s.n_examples, s.n_words
    FROM stg_head_matches AS s
    WHERE NOT EXISTS (
        SELECT 1
        FROM stg_head_matches AS t
        WHERE t.model_id = s.other_model_id AND t.other_model_id = s.model_id AND t.corpus = s.corpus
    )
),
ranked AS (
    SELECT
        *,
        row_number() OVER nearest AS rank,
        lead(js_distance) OVER nearest AS runner_up_distance
    FROM both_directions
    WINDOW nearest AS (
        PARTITION BY model_id, other_model_id, corpus, layer, head
        ORDER BY js_distance, other_layer, other_head
    )
)
SELECT
    model,
    model_id,
    corpus,
    layer,
    head,
    (layer - 0.5) / n_layers AS relative_depth,
    other_model,
    other_model_id,
    other_layer,
    other_head,
    (other_layer - 0.5) / other_n_layers AS other_relative_depth,
    js_distance,
    runner_up_distance,
    n_examples,
    n_words
FROM ranked
WHERE rank = 1;
