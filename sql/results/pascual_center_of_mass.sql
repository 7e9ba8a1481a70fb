-- Pascual et al. Fig. 4/5: mean over heads of each head's center of mass, per layer
-- (int_layer_centers_of_mass). The paper finds negative values (past) in early layers and
-- positive (future) later.
CREATE OR REPLACE VIEW pascual_center_of_mass AS
SELECT *
FROM int_layer_centers_of_mass;
