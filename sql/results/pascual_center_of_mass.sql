-- Pascual et al. Fig. 4/5: mean over heads of each head's center of mass, per layer.
-- The paper finds negative values (past) in early layers and positive (future) later.
CREATE OR REPLACE VIEW pascual_center_of_mass AS
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
