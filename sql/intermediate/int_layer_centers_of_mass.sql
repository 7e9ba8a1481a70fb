-- Pascual et al. Fig. 4/5 per layer: the mean over a layer's heads of each head's center of mass
-- (int_head_centers_of_mass), with the smallest and largest head's, per model, corpus, scope and
-- kind (attention / contribution).
CREATE OR REPLACE VIEW int_layer_centers_of_mass AS
SELECT
    model,
    model_id,
    corpus,
    scope,
    layer,
    kind,
    avg(center_of_mass) AS center_of_mass,
    min(center_of_mass) AS min_head_center_of_mass,
    max(center_of_mass) AS max_head_center_of_mass,
    relative_depth
FROM int_head_centers_of_mass
GROUP BY ALL;
