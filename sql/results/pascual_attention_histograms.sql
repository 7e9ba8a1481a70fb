-- Pascual et al. Fig. 2 and appendix A: normalized attention histograms per head,
-- and scaled to each head's maximum as the paper plots them.
CREATE OR REPLACE VIEW pascual_attention_histograms AS
SELECT
    model,
    model_id,
    corpus,
    scope,
    layer,
    head,
    "offset",
    value,
    value / max(value) OVER (PARTITION BY model_id, corpus, scope, layer, head) AS value_max_normalized,
    n_pairs
FROM position_profiles
WHERE kind = 'attention';
