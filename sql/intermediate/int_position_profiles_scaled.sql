-- Normalized histograms, also scaled to each head's maximum as Pascual et al. plot them.
CREATE OR REPLACE VIEW int_position_profiles_scaled AS
SELECT
    *,
    value / max(value) OVER (PARTITION BY model_id, corpus, kind, scope, layer, head) AS value_max_normalized
FROM int_position_profiles;
