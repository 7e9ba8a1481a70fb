-- Pascual et al. Fig. 7 / Appendix C cells: for one example per Kovaleva pattern class (the
-- example with the most heads of that class), every head's attention map beside its
-- previous-layer and input contribution maps (map: attention | previous_layer | input;
-- contributions normalized per query row), with the tokens on both axes. pattern_head: the
-- head's own class in that example (head_summaries.pattern) is the example's pattern, null where
-- the corpus has no head summaries.
CREATE OR REPLACE VIEW int_hta_example_maps AS
WITH cells AS (
    SELECT *
    FROM (
        UNPIVOT stg_hta_example_maps
        ON attention, previous_layer, input
        INTO NAME map VALUE value
    )
)
SELECT
    c.model,
    c.model_id,
    c.corpus,
    c.pattern,
    c.example_id,
    c.layer,
    c.head,
    c.map,
    c.query,
    c.key,
    q.token AS query_token,
    k.token AS key_token,
    c.value,
    s.pattern = c.pattern AS pattern_head,
    c.hta_method,
    (c.layer - 0.5) / c.n_layers AS relative_depth
FROM cells AS c
JOIN stg_tokens AS q
    ON q.model_id = c.model_id AND q.corpus = c.corpus AND q.example_id = c.example_id AND q.position = c.query
JOIN stg_tokens AS k
    ON k.model_id = c.model_id AND k.corpus = c.corpus AND k.example_id = c.example_id AND k.position = c.key
LEFT JOIN stg_head_summaries AS s
    ON s.model_id = c.model_id
    AND s.corpus = c.corpus
    AND s.example_id = c.example_id
    AND s.layer = c.layer
    AND s.head = c.head;
