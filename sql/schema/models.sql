-- One row per registered model: the partition key and where the weights come from. model_id is
-- unique by the write path (storage/model_rows.py upsert_model replaces the row in one transaction),
-- not by a constraint: DuckLake has no PRIMARY KEY (warehouses created earlier keep theirs).
CREATE TABLE IF NOT EXISTS models (
    model_id VARCHAR NOT NULL,         -- sanitized Dagster partition key
    source VARCHAR NOT NULL,           -- hub id or local path, as the user gave it
    resolved_path VARCHAR NOT NULL,    -- where it was loaded from
    revision VARCHAR,                  -- hub commit, package version or config hash
    model_type VARCHAR,
    n_layers SMALLINT NOT NULL,
    n_heads SMALLINT NOT NULL,
    takes_token_types BOOLEAN NOT NULL,
    registered_at TIMESTAMP NOT NULL  -- first registration (UTC)
);
-- The XNLI language (en, de, ar) the model stands for in Pascual Fig. 4 (models.toml's `language`,
-- `attn-warehouse add-model --language`); null: none. Read by pascual_language_center_of_mass.
ALTER TABLE models ADD COLUMN IF NOT EXISTS language VARCHAR;
