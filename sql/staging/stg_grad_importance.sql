-- Gradient-importance facts with the model's readable name.
CREATE OR REPLACE VIEW stg_grad_importance AS
SELECT
    m.source AS model,
    g.*
FROM grad_importance AS g
JOIN models AS m USING (model_id);
