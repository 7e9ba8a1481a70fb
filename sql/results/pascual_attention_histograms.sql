-- Pascual et al. Fig. 2 and appendix A: normalized attention histograms per head.
CREATE OR REPLACE VIEW pascual_attention_histograms AS
SELECT model, model_id, corpus, scope, layer, head, "offset", value, value_max_normalized, n_pairs, relative_depth
FROM int_position_profiles
WHERE kind = 'attention';
