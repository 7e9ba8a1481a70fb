"""The tables of sql/schema: their columns as DuckDB parses the DDL, which of them are written
per (model_id, corpus) partition, and ensure_schema, which creates what a warehouse lacks."""

import functools
import logging
from pathlib import Path

import duckdb

from dagster_project.settings import SQL_DIR
from dagster_project.storage.connections import roll_back
from dagster_project.storage.dense_grain import migrate_flat_tables
from dagster_project.storage.lake import holding_write_lock, is_lake, retry_on_conflict

_log = logging.getLogger(__name__)


def schema_files() -> list[Path]:
    """The DDL files of sql/schema, one per table, by name."""
    return sorted((SQL_DIR / "schema").glob("*.sql"))


@functools.cache
def schema_columns() -> dict[str, tuple[str, ...]]:
    """Every table of sql/schema with its columns in order, as DuckDB parses the DDL files
    (CREATE TABLE and the ALTERs that add columns), on a throwaway in-memory database."""
    with duckdb.connect(":memory:") as conn:
        ensure_schema(conn)
        rows = conn.execute(
            "SELECT table_name, list(column_name ORDER BY column_index) FROM duckdb_columns() "
            "WHERE NOT internal GROUP BY table_name ORDER BY table_name"
        ).fetchall()
    return {table: tuple(columns) for table, columns in rows}


BATCHES_TABLE = "batches"
PARTITION_COLUMNS = ("model_id", "corpus")


def tables_with_columns(conn: duckdb.DuckDBPyConnection) -> dict[str, tuple[str, ...]]:
    """The current database's tables with their columns in order."""
    rows = conn.execute(
        "SELECT table_name, list(column_name ORDER BY column_index) FROM duckdb_columns() "
        "JOIN duckdb_tables() USING (database_name, schema_name, table_name) "
        "WHERE database_name = current_database() AND schema_name = 'main' "
        "GROUP BY table_name ORDER BY table_name"
    ).fetchall()
    return {table: tuple(columns) for table, columns in rows}


def _partitioned(tables: dict[str, tuple[str, ...]]) -> list[str]:
    return [table for table, columns in tables.items() if set(PARTITION_COLUMNS) <= set(columns)]


def _run_schema_files(conn: duckdb.DuckDBPyConnection) -> list[str]:
    """Run sql/schema and give every partitioned table (model_id and corpus) its `batch_id`
    column; returns the partitioned tables, `batches` among them. Tables of a grain older than
    sql/schema's are rewritten first (dense_grain.migrate_flat_tables)."""
    migrate_flat_tables(conn, tables_with_columns(conn))
    for path in schema_files():
        conn.execute(path.read_text())
    partitioned = _partitioned(tables_with_columns(conn))
    for table in partitioned:
        if table != BATCHES_TABLE:
            conn.execute(f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS batch_id VARCHAR")
    return partitioned


@holding_write_lock
def ensure_schema(conn: duckdb.DuckDBPyConnection) -> None:
    """Create the tables of sql/schema that are missing and add missing columns.

    On DuckLake this is DDL, which conflicts with other processes' transactions, so it runs
    only when the lake lacks a table or column, in one transaction (retried on a conflict, as
    when two processes set up a new lake at once); new tables are partitioned by (model_id,
    corpus), giving Parquet files under model_id=…/corpus=…."""
    if not is_lake(conn):
        _run_schema_files(conn)
        return
    if _schema_is_current(conn):
        return

    def set_up() -> None:
        conn.execute("BEGIN TRANSACTION")
        try:
            existing = set(tables_with_columns(conn))
            for table in _run_schema_files(conn):
                if table not in existing:
                    conn.execute(f"ALTER TABLE {table} SET PARTITIONED BY ({', '.join(PARTITION_COLUMNS)})")
            conn.execute("COMMIT")
        except BaseException:
            roll_back(conn)
            raise

    retry_on_conflict(set_up, log=_log.info)


def _schema_is_current(conn: duckdb.DuckDBPyConnection) -> bool:
    present = tables_with_columns(conn)
    return all(set(columns) <= set(present.get(table, ())) for table, columns in schema_columns().items())


# The tables written per (model_id, corpus) partition: every table of sql/schema with both
# columns (all but `models` and `batches`), so a new schema file is writable by replace_partition as it is.
PARTITIONED_TABLES = frozenset(
    table
    for table, columns in schema_columns().items()
    if set(PARTITION_COLUMNS) <= set(columns) and table != BATCHES_TABLE
)


# Tables whose rows are taken on several weightings of the maps (a `weighting` column, docs/methods.md
# §3.9): stg_<table> keeps the attention rows, so every view written before the other weightings shows
# what it showed; stg_weighted_<table> keeps every weighting's rows.
WEIGHTING_COLUMN = "weighting"


# The tables with rows per weighting (WEIGHTING_COLUMN): two staging views each.
WEIGHTED_TABLES = frozenset(table for table in PARTITIONED_TABLES if WEIGHTING_COLUMN in schema_columns()[table])
