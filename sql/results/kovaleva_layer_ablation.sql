-- Kovaleva Fig. 9: the fine-tuned model's validation score (in %) with every head of one layer
-- attending uniformly, against no head disabled.
CREATE OR REPLACE VIEW kovaleva_layer_ablation AS
SELECT * EXCLUDE (kind, head)
FROM stg_ablation_scores
WHERE kind = 'layer';
