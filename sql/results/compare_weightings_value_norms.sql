-- Kobayashi et al. 2020's reading of Clark Fig. 2 (docs/methods.md §3.9): per layer and token class
-- (cls: [CLS]; sep: [SEP]; punct: '.' and ','; content: every other token) the mean norm
-- ||f_h(x_j)|| of the value vector through the head's output projection, over every head and every
-- token of the class in the corpus. A token the heads attend to much (Clark's [SEP]) but whose norm
-- is small contributes little: that is what the norm weighting of compare_weightings_special_tokens
-- shows map by map. Written when the facts asset's run config `weightings` includes norm.
CREATE OR REPLACE VIEW compare_weightings_value_norms AS
SELECT
    model,
    model_id,
    corpus,
    layer,
    token_class,
    sum(mean_norm * n_tokens) / sum(n_tokens) AS mean_norm,
    sum(n_tokens) // count(DISTINCT head) AS n_tokens,
    count(DISTINCT example_id) AS n_examples,
    (layer - 0.5) / any_value(n_layers) AS relative_depth
FROM stg_value_norms
GROUP BY model, model_id, corpus, layer, token_class
ORDER BY model_id, corpus, layer, token_class;
