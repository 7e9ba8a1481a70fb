-- Center of mass of each head's normalized histogram: sum(offset * h) / sum(h).
-- Negative: the head gathers from earlier tokens; positive: from later ones.
CREATE OR REPLACE VIEW int_head_centers_of_mass AS
SELECT
    model,
    model_id,
    corpus,
    kind,
    scope,
    layer,
    head,
    sum("offset" * value) / sum(value) AS center_of_mass,
    relative_depth
FROM int_position_profiles
GROUP BY ALL;
