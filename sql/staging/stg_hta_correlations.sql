-- HTA correlations with the model's readable name.
CREATE OR REPLACE VIEW stg_hta_correlations AS
SELECT
    m.source AS model,
    c.*
FROM hta_correlations AS c
JOIN models AS m USING (model_id);
