-- Relative-position histograms with the model's readable name.
CREATE OR REPLACE VIEW stg_position_histograms AS
SELECT
    m.source AS model,
    p.*
FROM position_histograms AS p
JOIN models AS m USING (model_id);
