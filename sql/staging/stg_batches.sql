-- Staging for `batches` (columns: sql/schema/batches.sql): the current batch of each (table,
-- model, corpus), the one every other stg_ view shows. Later writes win; batch_id breaks ties.
CREATE OR REPLACE VIEW stg_batches AS
SELECT *
FROM batches
QUALIFY row_number() OVER (PARTITION BY table_name, model_id, corpus ORDER BY written_at DESC, batch_id DESC) = 1;
