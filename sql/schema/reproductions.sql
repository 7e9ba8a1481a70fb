-- One row per model reproduced with `attn-warehouse reproduce`: the profile of its last reproduction
-- (quick: every result at reduced sizes; paper: the papers' settings). The report labels a quick
-- model's results as such, and a paper reproduction after a quick one recomputes everything.
CREATE TABLE IF NOT EXISTS reproductions (
    model_id VARCHAR NOT NULL,     -- models.model_id
    profile VARCHAR NOT NULL,      -- quick | paper
    reproduced_at TIMESTAMP NOT NULL  -- when the reproduction finished (UTC), or started where not finished
);
-- false: a quick reproduction that started and has not finished (an interrupted one stays so); its
-- model's rows are not all its, so no result is labelled quick (stg_reproductions), yet a paper
-- reproduction after it recomputes everything. NULL in rows recorded before this column.
ALTER TABLE reproductions ADD COLUMN IF NOT EXISTS finished BOOLEAN;
