-- Fills agg_pattern_shares for one (model_id, corpus): per (pattern class, example with classified
-- maps) how many of the example's (layer, head) maps fell into the class, and how many it has.
-- Every class appears for every such example (0 maps where none fell into it).
WITH maps AS (
    SELECT example_id, pattern
    FROM stg_head_summaries
    WHERE model_id = $model_id AND corpus = $corpus AND pattern IS NOT NULL
),
per_example AS (
    SELECT example_id, count(*) AS n_maps FROM maps GROUP BY ALL
),
classes (pattern, pattern_order) AS (
    VALUES ('vertical', 1), ('diagonal', 2), ('vertical+diagonal', 3), ('block', 4), ('heterogeneous', 5)
)
SELECT
    c.pattern,
    c.pattern_order,
    e.example_id,
    count(m.pattern) AS share_num,
    any_value(e.n_maps) AS share_den,
    count(m.pattern) AS maps_total
FROM per_example AS e
CROSS JOIN classes AS c
LEFT JOIN maps AS m ON m.example_id = e.example_id AND m.pattern = c.pattern
GROUP BY c.pattern, c.pattern_order, e.example_id;
