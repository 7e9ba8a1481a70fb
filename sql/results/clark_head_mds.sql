-- Clark et al. Fig. 6: heads embedded in 2-D by MDS of the mean JS divergence per token. Non-metric
-- (Kruskal's, the default): the farther two heads' (x, y), the larger their js in
-- clark_head_distances, at an arbitrary scale; metric_mds: the distance approximates the js itself.
-- behaviour: the head's §3 behaviour on the same corpus (int_head_behaviours' rules, on the
-- per-example means, mean_over = 'examples'), null where the corpus has no head summaries.
CREATE OR REPLACE VIEW clark_head_mds AS
SELECT
    h.model,
    h.model_id,
    h.corpus,
    h.layer,
    h.head,
    h.x,
    h.y,
    h.stress,
    h.metric_mds,
    b.behaviour,
    (h.layer - 0.5) / h.n_layers AS relative_depth
FROM stg_head_mds AS h
LEFT JOIN int_head_behaviours AS b USING (model_id, corpus, layer, head);
