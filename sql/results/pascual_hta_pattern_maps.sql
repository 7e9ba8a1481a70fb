-- Pascual et al. Fig. 7: per pattern class, one head of that class in its example (the first by
-- layer, then head, among the pattern heads of int_hta_example_maps) with its attention,
-- previous-layer and input contribution maps.
CREATE OR REPLACE VIEW pascual_hta_pattern_maps AS
WITH shown AS (
    SELECT model_id, corpus, pattern, min(layer * 1000 + head) AS position_key
    FROM int_hta_example_maps
    WHERE pattern_head
    GROUP BY ALL
)
SELECT m.*
FROM int_hta_example_maps AS m
JOIN shown AS s
    ON s.model_id = m.model_id
    AND s.corpus = m.corpus
    AND s.pattern = m.pattern
    AND s.position_key = m.layer * 1000 + m.head;
