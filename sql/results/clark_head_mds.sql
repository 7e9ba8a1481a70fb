-- Clark et al. Fig. 6: heads embedded in 2-D (metric MDS of the mean JS divergence per token);
-- Euclidean distance between two heads' (x, y) approximates their js in clark_head_distances.
CREATE OR REPLACE VIEW clark_head_mds AS
SELECT
    h.model,
    h.model_id,
    h.corpus,
    h.layer,
    h.head,
    h.x,
    h.y,
    h.stress
FROM stg_head_mds AS h;
