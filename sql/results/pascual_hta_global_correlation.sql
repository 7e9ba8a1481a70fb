-- Pascual et al. Fig. 6: attention vs input contribution per head. BERT-base: Pearson
-- < 0.5 for most heads after four layers, median < 0.25 in the last four.
CREATE OR REPLACE VIEW pascual_hta_global_correlation AS
SELECT model, model_id, corpus, hta_method, layer, head, pearson, spearman, n_examples, relative_depth,
    pearson_ci_low, pearson_ci_high, spearman_ci_low, spearman_ci_high
FROM int_hta_correlation_means
WHERE kind = 'input';
