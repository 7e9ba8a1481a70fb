-- A model's row (parameters named after the columns); storage/model_rows.py upsert_model first
-- deletes the row it replaces, in the same transaction.
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
    $language AS language,
    $registered_at AS registered_at;
