-- Kovaleva §4.4: per (example, feature, layer, head) the largest received attention
-- (column sum / n) and the largest [CLS]-row weight over the example's tokens of that
-- feature type. Examples without the feature have no row (left out of its average).
-- n_layers (the model's layer count) picks the final layer for Fig. 7; n_tokens (the example's
-- length) gives Fig. 7's length-normalized reading.
CREATE OR REPLACE VIEW int_feature_received_attention AS
SELECT
    r.model,
    r.model_id,
    r.corpus,
    r.example_id,
    f.feature,
    r.layer,
    r.head,
    max(r.received) AS received,
    max(r.from_cls) AS from_cls,
    r.n_layers,
    (r.layer - 0.5) / r.n_layers AS relative_depth,
    n.n_tokens
FROM stg_received_attention AS r
JOIN int_token_features AS f USING (model_id, corpus, example_id, position)
JOIN (
    SELECT model_id, corpus, example_id, count(*) AS n_tokens FROM stg_tokens GROUP BY ALL
) AS n USING (model_id, corpus, example_id)
GROUP BY ALL;
