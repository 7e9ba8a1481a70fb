-- Pascual et al. Fig. 3 and appendix B: normalized input-contribution histograms per head.
CREATE OR REPLACE VIEW pascual_contribution_histograms AS
SELECT model, model_id, corpus, scope, layer, head, "offset", value, value_max_normalized, n_pairs, relative_depth
FROM int_position_profiles
WHERE kind = 'contribution';
