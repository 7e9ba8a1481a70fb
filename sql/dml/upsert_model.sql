-- Register or refresh a model (parameters named after the columns).
INSERT INTO models BY NAME
SELECT
    $model_id AS model_id,
    $source AS source,
    $resolved_path AS resolved_path,
    $revision AS revision,
    $model_type AS model_type,
    $n_layers AS n_layers,
    $n_heads AS n_heads,
    $takes_token_types AS takes_token_types,
    $registered_at AS registered_at
ON CONFLICT (model_id) DO UPDATE SET
    source = excluded.source,
    resolved_path = excluded.resolved_path,
    revision = excluded.revision,
    model_type = excluded.model_type,
    n_layers = excluded.n_layers,
    n_heads = excluded.n_heads,
    takes_token_types = excluded.takes_token_types;
