"""The fact tables stored in a dense grain: position_histograms, contribution_histograms and
relation_hits keep a list per (example, [scope,] layer, head) instead of a row per offset or
word (their sql/schema files say how), and their stg_ views unnest them back to that flat grain.

Rows in the flat grain are packed by the queries of sql/dense/, reading the relation
`flat_rows`: when a warehouse written before the dense grain is opened (`migrate_flat_tables`,
from ensure_schema), and when rows are written in the flat grain (`insert_statement`, from
replace_partition), as only hand-made test rows are: the passes write the dense grain
(compute/batching.histogram_frame, compute/attention_facts.relation_hit_frame).
"""

import duckdb

from dagster_project.settings import SQL_DIR
from dagster_project.storage.lake import is_lake

# table -> (the flat grain's column that the dense grain folds into its lists, its packing query in sql/dense/)
DENSE_TABLES = {
    "position_histograms": ("offset", "histograms"),
    "contribution_histograms": ("offset", "histograms"),
    "relation_hits": ("word_index", "relation_hits"),
}
FLAT_ROWS = "flat_rows"  # the relation the packing queries read


def packing_query(table: str) -> str:
    """The SELECT that packs `flat_rows` of the flat grain into `table`'s dense rows."""
    return (SQL_DIR / "dense" / f"{DENSE_TABLES[table][1]}.sql").read_text()


def is_flat(table: str, columns: list[str] | tuple[str, ...]) -> bool:
    """Whether rows with these columns are in `table`'s flat grain (the dense grain has no row per offset or word)."""
    return table in DENSE_TABLES and DENSE_TABLES[table][0] in columns


def insert_statement(table: str, columns: list[str], relation: str) -> str:
    """INSERT of the rows of `relation` (with `columns`) into `table`, packed first when they are in the flat grain."""
    if is_flat(table, columns):
        return f"INSERT INTO {table} BY NAME WITH {FLAT_ROWS} AS (SELECT * FROM {relation}) {packing_query(table)}"
    return f"INSERT INTO {table} BY NAME SELECT * FROM {relation}"


ROWS_PER_PACKING = 2_000_000  # flat rows packed per statement: DuckDB's ordered list() aggregates do not spill


def migrate_flat_tables(conn: duckdb.DuckDBPyConnection, existing: dict[str, tuple[str, ...]]) -> list[str]:
    """Rewrite every dense-grain table that `existing` (table -> columns of the open warehouse)
    shows in the flat grain, as a warehouse written before the dense grain has it: the table is
    renamed, created anew from its schema file, filled with the packed rows (batch_id kept; in
    slices of examples, so memory stays bounded) and the old one dropped. Runs in the caller's
    transaction on DuckLake, in its own on the DuckDB file, so a failure leaves the old table as
    it was. Returns the tables rewritten."""
    flat = [table for table in DENSE_TABLES if table in existing and is_flat(table, existing[table])]
    if not flat:
        return []
    lake = is_lake(conn)
    if not lake:
        conn.execute("BEGIN TRANSACTION")
    try:
        for table in flat:
            old = f"{table}_flat_grain"
            conn.execute(f"ALTER TABLE {table} RENAME TO {old}")
            conn.execute(f"ALTER TABLE {old} ADD COLUMN IF NOT EXISTS batch_id VARCHAR")  # the packing keeps it
            conn.execute((SQL_DIR / "schema" / f"{table}.sql").read_text())
            conn.execute(f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS batch_id VARCHAR")
            if lake:  # as ensure_schema sets up a new lake table
                conn.execute(f"ALTER TABLE {table} SET PARTITIONED BY (model_id, corpus)")
            (rows,) = conn.execute(f"SELECT count(*) FROM {old}").fetchone()
            slices = max(1, -(-rows // ROWS_PER_PACKING))
            for part in range(slices):  # every row of an (example, ...) group falls in the same slice
                conn.execute(
                    f"INSERT INTO {table} BY NAME WITH {FLAT_ROWS} AS "
                    f"(SELECT * FROM {old} WHERE hash(example_id) % $slices = $part) {packing_query(table)}",
                    {"slices": slices, "part": part},
                )
            conn.execute(f"DROP TABLE {old}")
        if not lake:
            conn.execute("COMMIT")
    except BaseException:
        if not lake:
            conn.execute("ROLLBACK")
        raise
    return flat
