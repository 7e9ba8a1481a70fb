"""Warehouse storage: schema and views from `sql/`, partition-replacing writes through Arrow,
on either backend (backend.py): a DuckDB file, or a DuckLake (lake.py) that many processes write.

Every write is a batch: its rows carry a `batch_id`, recorded in `batches` in the same
transaction, and the stg_ views show each (table, model_id, corpus)'s current batch. On the
DuckDB file (one writer per file, so callers compute first and hold a connection only for a
short write transaction) the write also deletes the partition's older rows. On DuckLake it only
appends, since a delete aborts concurrent inserts into the same table; expire_replaced_batches
(the maintenance asset) removes replaced batches later, and DDL runs only when the lake's schema
is behind sql/schema.

The modules by concern: schema.py (the tables of sql/schema), sql_files.py (the catalogue of
sql/'s views and their order), aggregates.py (the materialized aggregates), partition_writes.py
(writes and what a failed one says), views.py (views applied), batches.py (reading and expiring
batches), model_rows.py (the models and reproductions tables), connections.py (the file's lock
and the errors).
"""
