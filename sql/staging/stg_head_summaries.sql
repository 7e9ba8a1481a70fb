-- Head summaries with the model's readable name.
CREATE OR REPLACE VIEW stg_head_summaries AS
SELECT
    m.source AS model,
    h.*
FROM head_summaries AS h
JOIN models AS m USING (model_id);
