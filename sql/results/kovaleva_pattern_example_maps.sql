-- Kovaleva et al. Fig. 2 (right): the kept example maps of each pattern class, with the
-- tokens on both axes, so a person can judge the classification rules.
CREATE OR REPLACE VIEW kovaleva_pattern_example_maps AS
SELECT
    p.model,
    p.model_id,
    p.corpus,
    p.corpus AS task,
    p.pattern,
    p.example_id,
    p.layer,
    p.head,
    p.query,
    p.key,
    q.token AS query_token,
    k.token AS key_token,
    p.attention,
    (p.layer - 0.5) / p.n_layers AS relative_depth
FROM stg_pattern_example_maps AS p
JOIN stg_tokens AS q
    ON q.model_id = p.model_id AND q.corpus = p.corpus AND q.example_id = p.example_id AND q.position = p.query
JOIN stg_tokens AS k
    ON k.model_id = p.model_id AND k.corpus = p.corpus AND k.example_id = p.example_id AND k.position = p.key;
