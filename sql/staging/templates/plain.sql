-- The staging view of a table that needs nothing of its own (columns in sql/schema/{table}.sql):
-- every row of the partition's current batch (stg_batches) and every column but batch_id, with
-- the model's readable name and shape from `models`. storage/sql_files.py instantiates it for
-- every partitioned table of sql/schema without a file of its own in sql/staging; for a table with
-- rows per weighting, stg_<table> keeps the attention rows (the registry's clause after the WHERE)
-- and stg_weighted_<table> every row. The staging rules: stg_models.sql.
CREATE OR REPLACE VIEW {view} AS
SELECT
    m.source AS model,
    t.* EXCLUDE (batch_id),
    m.n_layers,
    m.n_heads
FROM {table} AS t
JOIN models AS m USING (model_id)
WHERE t.batch_id IN (SELECT batch_id FROM stg_batches WHERE table_name = '{table}')
{rows};
