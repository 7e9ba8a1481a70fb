-- One row per (table, model_id, corpus) write: which batch of rows a materialization wrote. Every
-- table with model_id and corpus also has a `batch_id` column (added by storage/schema.py
-- ensure_schema), and its stg_ view shows only the partition's current batch (stg_batches): the
-- latest written_at (then batch_id) per (table_name, model_id, corpus). The DuckDB file backend
-- deletes a partition's older batches in the write's own transaction; on DuckLake writes only
-- append (a delete would abort concurrent writers of the same table) and the maintenance step
-- deletes replaced batches. A batch's rows and its row here commit together, so a write that
-- dies midway leaves nothing visible.
CREATE TABLE IF NOT EXISTS batches (
    table_name VARCHAR NOT NULL,
    model_id VARCHAR NOT NULL,
    corpus VARCHAR NOT NULL,
    batch_id VARCHAR NOT NULL,          -- one id per write, shared by the tables it wrote
    written_at TIMESTAMP NOT NULL,      -- UTC
    n_rows BIGINT NOT NULL              -- 0: the write cleared the partition of this table
);
-- The batch of the partition's examples (the corpus asset's write of the same model and corpus) that
-- a batch's rows were computed from; null for the examples' own write and for writes that say none.
-- A write naming it commits only while those examples are still the partition's current ones.
ALTER TABLE batches ADD COLUMN IF NOT EXISTS examples_batch_id VARCHAR;
