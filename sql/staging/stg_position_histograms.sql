-- Relative-position histograms of attention and of the HTA input contribution, with the
-- model's readable name.
CREATE OR REPLACE VIEW stg_position_histograms AS
SELECT m.source AS model, p.*
FROM (
    SELECT * EXCLUDE (hta_method) FROM contribution_histograms
    UNION ALL BY NAME
    SELECT * FROM position_histograms
) AS p
JOIN models AS m USING (model_id);
