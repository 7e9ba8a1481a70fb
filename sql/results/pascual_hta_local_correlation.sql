-- Pascual et al. Fig. 1: attention vs previous-layer contribution per head. BERT-base:
-- Pearson > 0.7 for all but two heads, > 0.85 for 90% of heads.
CREATE OR REPLACE VIEW pascual_hta_local_correlation AS
SELECT model, model_id, corpus, layer, head, pearson, spearman, n_examples, relative_depth,
    pearson_ci_low, pearson_ci_high, spearman_ci_low, spearman_ci_high
FROM int_hta_correlation_means
WHERE kind = 'previous_layer';
