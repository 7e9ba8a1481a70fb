"""DuckDB storage: schema and views from `sql/`, partition-replacing writes through Arrow.

DuckDB allows one writer per file, so callers compute first and then hold a
connection only for a short write transaction.
"""

import hashlib
import logging
import re
import shutil
import time
from collections.abc import Callable
from datetime import UTC, datetime
from graphlib import TopologicalSorter
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from dagster_project.compute.models import ModelSpec
from dagster_project.settings import SQL_DIR

_log = logging.getLogger(__name__)

VIEW_LAYERS = ("staging", "intermediate", "results")  # in the order they read each other, like dbt's layers

# Comments, string literals and quoted identifiers: the first two are blanked before looking for view names.
_SQL_COMMENTS_AND_QUOTES = re.compile(r"--[^\n]*|/\*.*?\*/|'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"", re.DOTALL)


def strip_sql_comments(sql: str) -> str:
    """SQL without its `--` and `/* */` comments, and with string literals emptied (`''`), so a
    name mentioned in a comment or a string is not read as a reference. Quoted identifiers stay."""

    def blank(match: re.Match[str]) -> str:
        text = match[0]
        return text if text.startswith('"') else "''" if text.startswith("'") else " "

    return _SQL_COMMENTS_AND_QUOTES.sub(blank, sql)


def schema_files() -> list[Path]:
    return sorted((SQL_DIR / "schema").glob("*.sql"))


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


def view_files() -> list[Path]:
    """View files in an order where every view comes after the views it reads.

    A view depends on another when the other's name (its file stem) appears as a word in its
    SQL, comments and string literals left out, the way dbt's ref() orders models, without a
    templating step.
    """
    files: dict[str, Path] = {}
    for layer in VIEW_LAYERS:
        for path in sorted((SQL_DIR / layer).glob("*.sql")):
            if path.stem in files:
                raise ValueError(f"view {path.stem} is defined twice: {files[path.stem]} and {path}")
            files[path.stem] = path
    code = {name: strip_sql_comments(path.read_text()) for name, path in files.items()}
    graph = {
        name: {other for other in files if other != name and re.search(rf"\b{re.escape(other)}\b", code[name])}
        for name in files
    }
    return [files[name] for name in TopologicalSorter(graph).static_order()]


def sql_code_version() -> str:
    """Hash of every SQL file, so a change to any view or table marks the views stale."""
    digest = hashlib.sha256()
    for path in schema_files() + view_files():
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def ensure_schema(conn: duckdb.DuckDBPyConnection) -> None:
    for path in schema_files():
        conn.execute(path.read_text())


# The tables written per (model_id, corpus) partition: every table of sql/schema with both
# columns (all but `models`), so a new schema file is writable by replace_partition as it is.
PARTITIONED_TABLES = frozenset(
    table for table, columns in schema_columns().items() if {"model_id", "corpus"} <= set(columns)
)


def apply_views(conn: duckdb.DuckDBPyConnection) -> list[str]:
    """(Re)create every view; idempotent. Returns the view names in creation order."""
    ensure_schema(conn)
    created = []
    for path in view_files():
        conn.execute(path.read_text())
        created.append(path.stem)
    return created


DEFAULT_LOCK_TIMEOUT_SECONDS = 300.0
LOCK_WAIT_MESSAGE = "waiting for the warehouse lock held by another process"
_LOCK_HOLDER = re.compile(r"Conflicting lock is held in (?P<program>.*?) \(PID (?P<pid>\d+)\)")
# What DuckDB (or the OS under it) says when a write finds no room left.
_NO_SPACE = re.compile(r"no space left|disk (is )?full|out of (disk )?space|not enough space|ENOSPC", re.IGNORECASE)


class WarehouseLockedError(RuntimeError):
    """Another process held the warehouse file for longer than the lock timeout."""


class WarehouseFullError(RuntimeError):
    """A write to the warehouse failed for lack of disk space (or another IO error); nothing was committed."""


def _lock_holder(error: Exception) -> str:
    """' (PID 123, /usr/bin/duckdb)' from DuckDB's lock error, '' when it names no process."""
    found = _LOCK_HOLDER.search(str(error))
    return f" (PID {found['pid']}, {found['program']})" if found else ""


def connect_for_writing(
    database: str,
    config: dict[str, Any] | None = None,
    timeout_seconds: float = DEFAULT_LOCK_TIMEOUT_SECONDS,
    log: Callable[[str], None] = _log.info,
) -> duckdb.DuckDBPyConnection:
    """A read-write connection to `database`, waiting up to `timeout_seconds` while another
    process holds the file (DuckDB allows one writing process, and no writer beside readers
    of other processes). `log` gets a message when the wait starts and every 30 s of it.
    Raises WarehouseLockedError, with one line saying what to do, when the wait runs out."""
    started = time.monotonic()
    delay, next_note = 0.05, 0.0
    while True:
        try:
            return duckdb.connect(database, read_only=False, config=config or {})
        except duckdb.IOException as error:
            if "could not set lock" not in str(error).lower():
                raise
            waited = time.monotonic() - started
            if waited >= timeout_seconds:
                raise WarehouseLockedError(
                    f"the warehouse {database} is still locked by another process{_lock_holder(error)} "
                    f"after {timeout_seconds:g} s: "
                    "close that connection (a DuckDB CLI, notebook or script holding the file), and use "
                    '`attn-warehouse sql "<query>"` for ad-hoc queries (it opens the file read-only and closes it), '
                    "then re-run; or wait longer with ATTN_LOCK_TIMEOUT_SECONDS"
                ) from None
            if waited >= next_note:
                log(
                    f"{LOCK_WAIT_MESSAGE}{_lock_holder(error)} on {database}: "
                    f"waited {waited:.0f} s of {timeout_seconds:g} s (ATTN_LOCK_TIMEOUT_SECONDS)"
                )
                next_note = waited + 30.0
            time.sleep(min(delay, max(timeout_seconds - waited, 0.0)))
            delay = min(delay * 2, 1.0)


def _database_file(conn: duckdb.DuckDBPyConnection) -> Path | None:
    """The file behind the connection's current database; None in memory."""
    row = conn.execute("SELECT path FROM duckdb_databases() WHERE database_name = current_database()").fetchone()
    return Path(row[0]) if row and row[0] else None


def _megabytes(n_bytes: float) -> str:
    return f"{n_bytes / 1e6:,.1f} MB"


def _write_failure(
    error: duckdb.Error, database: Path | None, frames: dict[str, pl.DataFrame], model_id: str, corpus: str
) -> WarehouseFullError:
    needed = sum(frame.to_arrow().nbytes for frame in frames.values())
    where = f"the warehouse {database}" if database else "the in-memory warehouse"
    free = ""
    if database is not None:
        try:
            free = f", {_megabytes(shutil.disk_usage(database.parent).free)} free there now"
        except OSError:
            pass
    cause = " ".join(str(error).split())
    reason = "the disk is full" if _NO_SPACE.search(cause) else "the disk refused the write"
    return WarehouseFullError(
        f"could not write partition ({model_id}, {corpus}) to {where}: {reason} ({cause}). "
        f"The new rows take about {_megabytes(needed)} in memory (Arrow), and DuckDB needs about that much disk "
        f"again for its write-ahead log{free}. Nothing was written: the partition keeps its previous rows. "
        "Free space on that disk (or point ATTN_WAREHOUSE to a file on a larger one) and re-run."
    )


def replace_partition(
    conn: duckdb.DuckDBPyConnection, frames: dict[str, pl.DataFrame], model_id: str, corpus: str
) -> dict[str, int]:
    """Replace the (model_id, corpus) rows of several tables in one transaction.

    Either every table gets its new rows or none changes; an empty frame clears the
    partition's rows of its table. Returns rows written per table.
    """
    unknown = set(frames) - PARTITIONED_TABLES
    if unknown:
        raise ValueError(f"not a partitioned warehouse table: {sorted(unknown)}")
    ensure_schema(conn)
    database = _database_file(conn)
    conn.execute("BEGIN TRANSACTION")
    try:
        for table, frame in frames.items():
            conn.execute(f"DELETE FROM {table} WHERE model_id = ? AND corpus = ?", [model_id, corpus])
            if frame.is_empty():  # the partition now has no rows in this table
                continue
            incoming = frame.with_columns(model_id=pl.lit(model_id), corpus=pl.lit(corpus)).to_arrow()
            conn.register("incoming_rows", incoming)
            conn.execute(f"INSERT INTO {table} BY NAME SELECT * FROM incoming_rows")
            conn.unregister("incoming_rows")
        conn.execute("COMMIT")
    except duckdb.Error as error:
        _roll_back(conn)
        if isinstance(error, duckdb.IOException) or _NO_SPACE.search(str(error)):
            raise _write_failure(error, database, frames, model_id, corpus) from error
        raise
    except BaseException:
        _roll_back(conn)
        raise
    return {table: frame.height for table, frame in frames.items()}


def _roll_back(conn: duckdb.DuckDBPyConnection) -> None:
    """ROLLBACK after a failed write; a connection that an IO error left unusable has nothing
    committed to undo, and its error is not the one to report."""
    try:
        conn.execute("ROLLBACK")
    except duckdb.Error as error:
        _log.warning("ROLLBACK after a failed warehouse write failed too: %s", error)


def upsert_model(conn: duckdb.DuckDBPyConnection, spec: ModelSpec) -> None:
    """Record (or refresh) a model's row in the `models` mapping table."""
    ensure_schema(conn)
    conn.execute(
        (SQL_DIR / "dml" / "upsert_model.sql").read_text(),
        {
            "model_id": spec.model_id,
            "source": spec.source,
            "resolved_path": spec.resolved_path,
            "revision": spec.revision,
            "model_type": spec.model_type,
            "n_layers": spec.n_layers,
            "n_heads": spec.n_heads,
            "takes_token_types": spec.takes_token_types,
            "registered_at": datetime.now(UTC).replace(tzinfo=None),
        },
    )


def model_source(conn: duckdb.DuckDBPyConnection, model_id: str) -> str:
    """The hub id or path registered for a partition key."""
    ensure_schema(conn)
    row = conn.execute("SELECT source FROM models WHERE model_id = ?", [model_id]).fetchone()
    if row is None:
        raise LookupError(
            f"Model partition '{model_id}' has no row in the models table. Register the model first: "
            "`attn-warehouse add-model <hub id or path>`."
        )
    return row[0]


def partition_rows(
    conn: duckdb.DuckDBPyConnection,
    relation: str,
    model_id: str,
    corpus: str | None = None,
    columns: tuple[str, ...] = (),
) -> pl.DataFrame:
    """Rows of a table or view for one model (and corpus), through DuckDB's relational API."""
    condition = duckdb.ColumnExpression("model_id") == duckdb.ConstantExpression(model_id)
    if corpus is not None:
        condition = condition & (duckdb.ColumnExpression("corpus") == duckdb.ConstantExpression(corpus))
    rows = conn.table(relation).filter(condition)
    return (rows.select(*columns) if columns else rows).pl()
