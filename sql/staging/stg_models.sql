-- Staging for `models` (columns: sql/schema/models.sql): the registered models, with `model`, the
-- readable name every view shows (the hub id or path the user gave).
--
-- The staging layer has one stg_<table> view per table of sql/schema, and it is the only layer
-- that reads the tables and the only one that joins `models`: each stg_<table> view keeps every
-- column of its table but `batch_id`, keeps the rows of the partition's current batch only
-- (stg_batches), and adds the model's readable columns that the views above it show (model,
-- n_layers, n_heads). A table with rows per weighting of the maps (a `weighting` column, docs/methods.md
-- §3.9) has two: stg_<table> keeps the attention rows, so the views written before the other
-- weightings show what they showed, and stg_weighted_<table> keeps every weighting's. A staged row belongs to a registered model (inner join): facts are written
-- only for registered models, and the result views have always shown registered models only.
-- sql/intermediate (int_*) reads stg_* and int_* views; sql/results reads stg_* and int_* views.
CREATE OR REPLACE VIEW stg_models AS
SELECT
    source AS model,
    *
FROM models;
