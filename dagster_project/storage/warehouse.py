"""Warehouse storage: schema and views from `sql/`, partition-replacing writes through Arrow,
on either backend (backend.py): a DuckDB file, or a DuckLake (lake.py) that many processes write.

Every write is a batch: its rows carry a `batch_id`, recorded in `batches` in the same
transaction, and the stg_ views show each (table, model_id, corpus)'s current batch. On the
DuckDB file (one writer per file, so callers compute first and hold a connection only for a
short write transaction) the write also deletes the partition's older rows. On DuckLake it only
appends, since a delete aborts concurrent inserts into the same table; expire_replaced_batches
(the maintenance asset) removes replaced batches later, and DDL runs only when the lake's schema
is behind sql/schema.
"""

import functools
import hashlib
import logging
import re
import shutil
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from graphlib import TopologicalSorter
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from dagster_project.compute import bootstrap
from dagster_project.compute.models import ModelSpec
from dagster_project.settings import SQL_DIR
from dagster_project.storage.claims import (
    CLAIMS_DIR,
    JUDGMENTS_VIEW,
    claim_files,
    claims_frame,
    judgments_sql,
    load_claims,
)
from dagster_project.storage.dense_grain import insert_statement, migrate_flat_tables
from dagster_project.storage.lake import LAKE_NAME, is_lake, mask_password, retry_on_conflict

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


# Staging views written once as a template in sql/staging/templates and made for each table
# that has no file of its own in sql/staging: histogram tables from `histograms` with their
# kind, every other partitioned table from `plain`. A template's {placeholders} are identifiers
# and constants of this registry, never user values: {view} the view's name, {table} the table's,
# {rows} a clause keeping some of its rows (empty: all of them).
STAGING_TEMPLATES: Mapping[str, tuple[str, Mapping[str, str]]] = {
    "position_histograms": ("histograms", {"kind": "attention"}),
    "contribution_histograms": ("histograms", {"kind": "contribution"}),
}
PLAIN_STAGING = "plain"
# Tables whose rows are taken on several weightings of the maps (a `weighting` column, docs/methods.md
# §3.9): stg_<table> keeps the attention rows, so every view written before the other weightings shows
# what it showed; stg_weighted_<table> keeps every weighting's rows.
WEIGHTING_COLUMN = "weighting"
WEIGHTED_STAGING = "stg_weighted_"
# Per template, the clause of stg_<table> keeping a weighted table's attention rows: the histograms'
# comes after the window that spreads each example's pair counts, which any weighting's row may hold.
ATTENTION_ROWS = {
    PLAIN_STAGING: "    AND t.weighting = 'attention'",
    "histograms": "QUALIFY weighting = 'attention'",
}


def staged_table(view: str) -> str | None:
    """The table a staging view shows (stg_<table> and stg_weighted_<table>); None for another view."""
    if view.startswith(WEIGHTED_STAGING):
        return view.removeprefix(WEIGHTED_STAGING)
    return view.removeprefix("stg_") if view.startswith("stg_") else None


@dataclass(frozen=True)
class View:
    """One view of sql/: its name, layer (VIEW_LAYERS) and CREATE statement. `source` is its
    file, or for a staging view made from a template, the template."""

    name: str
    layer: str
    sql: str
    source: Path


def _templated_staging(sql_dir: Path, written: set[str]) -> list[View]:
    """Staging views from sql/staging/templates for the partitioned tables (PARTITIONED_TABLES: only
    the current tree has templates) with no file of their own."""
    templates = sql_dir / "staging" / "templates"
    if not templates.is_dir():  # an older tree's sql/, with a file for every staging view
        return []
    views = []
    for table in sorted(PARTITIONED_TABLES):
        template, values = STAGING_TEMPLATES.get(table, (PLAIN_STAGING, {}))
        source = templates / f"{template}.sql"
        weighted = table in WEIGHTED_TABLES
        for view, rows in (
            (f"stg_{table}", ATTENTION_ROWS[template] if weighted else ""),
            (f"{WEIGHTED_STAGING}{table}", ""),
        ):
            if view in written or (view.startswith(WEIGHTED_STAGING) and not weighted):
                continue
            sql = source.read_text().format(view=view, table=table, rows=rows, **values)
            views.append(View(view, "staging", sql, source))
    return views


def view_definitions(sql_dir: Path | None = None) -> list[View]:
    """Views of `sql_dir` (default sql/; another, e.g. an older commit's sql/ checked out
    elsewhere, for a comparison) in an order where every view comes after the views it reads:
    one per file of its layers, and the staging views made from templates.

    A view depends on another when the other's name appears as a word in its SQL, comments and
    string literals left out, the way dbt's ref() orders models, without a templating step.
    """
    sql_dir = sql_dir or SQL_DIR
    views: dict[str, View] = {}
    for layer in VIEW_LAYERS:
        for path in sorted((sql_dir / layer).glob("*.sql")):
            if path.stem in views:
                raise ValueError(f"view {path.stem} is defined twice: {views[path.stem].source} and {path}")
            views[path.stem] = View(path.stem, layer, path.read_text(), path)
    views |= {view.name: view for view in _templated_staging(sql_dir, set(views))}
    claims_dir = sql_dir / CLAIMS_DIR
    if claims_dir.is_dir():  # an older tree's sql/ has no claims
        views[JUDGMENTS_VIEW] = View(JUDGMENTS_VIEW, "results", judgments_sql(load_claims(sql_dir)), claims_dir)
    code = {name: strip_sql_comments(view.sql) for name, view in views.items()}
    graph = {
        name: {other for other in views if other != name and re.search(rf"\b{re.escape(other)}\b", code[name])}
        for name in views
    }
    return [views[name] for name in TopologicalSorter(graph).static_order()]


def aggregate_files() -> list[Path]:
    """sql/aggregates: per aggregate table of sql/schema, the query that fills one (model_id, corpus) partition."""
    return sorted((SQL_DIR / "aggregates").glob("*.sql"))


def sql_code_version() -> str:
    """Hash of every SQL file, so a change to any view, table or aggregate marks the views stale."""
    digest = hashlib.sha256()
    for path in schema_files() + aggregate_files() + claim_files():
        digest.update(path.read_bytes())
    for view in view_definitions():
        digest.update(view.sql.encode())
    return digest.hexdigest()[:16]


@functools.cache
def aggregate_version() -> str:
    """What an aggregate's rows were computed by: every SQL file and the bootstrap's settings. It
    prefixes the aggregate batches' ids, so apply_views recomputes the aggregates after either changes."""
    settings = f"{bootstrap.N_RESAMPLES}/{bootstrap.SEED}/{bootstrap.LEVEL}"
    return hashlib.sha256(f"{sql_code_version()}/{settings}".encode()).hexdigest()[:12]


BATCHES_TABLE = "batches"
PARTITION_COLUMNS = ("model_id", "corpus")


def _tables_with_columns(conn: duckdb.DuckDBPyConnection) -> dict[str, tuple[str, ...]]:
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
    migrate_flat_tables(conn, _tables_with_columns(conn))
    for path in schema_files():
        conn.execute(path.read_text())
    partitioned = _partitioned(_tables_with_columns(conn))
    for table in partitioned:
        if table != BATCHES_TABLE:
            conn.execute(f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS batch_id VARCHAR")
    return partitioned


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
            existing = set(_tables_with_columns(conn))
            for table in _run_schema_files(conn):
                if table not in existing:
                    conn.execute(f"ALTER TABLE {table} SET PARTITIONED BY ({', '.join(PARTITION_COLUMNS)})")
            conn.execute("COMMIT")
        except BaseException:
            _roll_back(conn)
            raise

    retry_on_conflict(set_up, log=_log.info)


def _schema_is_current(conn: duckdb.DuckDBPyConnection) -> bool:
    present = _tables_with_columns(conn)
    return all(set(columns) <= set(present.get(table, ())) for table, columns in schema_columns().items())


# The tables written per (model_id, corpus) partition: every table of sql/schema with both
# columns (all but `models` and `batches`), so a new schema file is writable by replace_partition as it is.
PARTITIONED_TABLES = frozenset(
    table
    for table, columns in schema_columns().items()
    if set(PARTITION_COLUMNS) <= set(columns) and table != BATCHES_TABLE
)


# The tables with rows per weighting (WEIGHTING_COLUMN): two staging views each.
WEIGHTED_TABLES = frozenset(table for table in PARTITIONED_TABLES if WEIGHTING_COLUMN in schema_columns()[table])


# The materialized aggregates: a table of sql/schema per file of sql/aggregates, whose query computes
# one (model_id, corpus) partition of it from the facts (through stg_/int_ views) with the named
# parameters $model_id and $corpus. A query giving an `example_id` column gives per-example sums
# (compute/bootstrap.py summarize_units turns them into ratios with bootstrap intervals); any other
# gives the table's rows as they are.
AGGREGATE_TABLES = tuple(path.stem for path in aggregate_files())
_unknown_aggregates = set(AGGREGATE_TABLES) - set(PARTITIONED_TABLES)
if _unknown_aggregates:
    raise ValueError(f"sql/aggregates/{sorted(_unknown_aggregates)}.sql fill no partitioned table of sql/schema")


@functools.cache
def _view_code() -> dict[str, str]:
    return {view.name: strip_sql_comments(view.sql) for view in view_definitions()}


def views_reached(sql: str) -> frozenset[str]:
    """The views `sql` reads, directly or through the views it reads (by name, as
    view_definitions orders them)."""
    code = _view_code()

    def names_in(text: str) -> set[str]:
        return {name for name in code if re.search(rf"\b{re.escape(name)}\b", text)}

    reached: set[str] = set()
    todo = names_in(strip_sql_comments(sql))
    while todo:
        name = todo.pop()
        reached.add(name)
        todo |= names_in(code[name]) - reached
    return frozenset(reached)


@functools.cache
def aggregate_sources() -> dict[str, frozenset[str]]:
    """Per aggregate table, the fact tables its query reads, directly or through the views it
    reads: a write to any of them makes it stale."""
    facts = PARTITIONED_TABLES - set(AGGREGATE_TABLES)
    return {
        table: frozenset(
            staged_table(name) for name in views_reached((SQL_DIR / "aggregates" / f"{table}.sql").read_text())
        )
        & facts
        for table in AGGREGATE_TABLES
    }


def aggregate_rows(conn: duckdb.DuckDBPyConnection, table: str, model_id: str, corpus: str) -> pl.DataFrame:
    """One partition of an aggregate table computed from the current facts (without model_id and corpus)."""
    query = (SQL_DIR / "aggregates" / f"{table}.sql").read_text()
    rows = conn.execute(query, {"model_id": model_id, "corpus": corpus}).pl()
    if bootstrap.UNIT in rows.columns and not rows.is_empty():
        return bootstrap.summarize_units(rows)
    return rows.drop(bootstrap.UNIT, strict=False)


def _aggregates_defined(conn: duckdb.DuckDBPyConnection) -> bool:
    """Whether the warehouse has this code's views (the staging views of the aggregate tables are
    among them), which the aggregate queries read; before apply_views has run, it has not."""
    (count,) = conn.execute(
        "SELECT count(*) FROM duckdb_views() WHERE database_name = current_database() AND list_contains(?, view_name)",
        [[f"stg_{table}" for table in AGGREGATE_TABLES]],
    ).fetchone()
    return count == len(AGGREGATE_TABLES)


def _write_aggregates(
    conn: duckdb.DuckDBPyConnection, tables: list[str], model_id: str, corpus: str, batch_id: str, written_at: datetime
) -> dict[str, int]:
    """Recompute the aggregate tables' (model_id, corpus) partition from the facts as they are in
    the open transaction, and write it as a batch whose id carries aggregate_version(). Returns
    the rows written per table."""
    frames = {table: aggregate_rows(conn, table, model_id, corpus) for table in tables}
    _write_batch(conn, frames, model_id, corpus, f"{aggregate_version()}:{batch_id}", written_at)
    return {table: frame.height for table, frame in frames.items()}


def refresh_aggregates(
    conn: duckdb.DuckDBPyConnection, model_id: str, corpus: str, tables: list[str] | None = None
) -> dict[str, int]:
    """Recompute the (model_id, corpus) partition of every aggregate table (or of `tables`) from
    the current facts, in one transaction: for facts written without replace_partition (which
    refreshes the aggregates reading what it writes). Returns the rows written per table."""
    tables = list(AGGREGATE_TABLES) if tables is None else tables
    unknown = set(tables) - set(AGGREGATE_TABLES)
    if unknown:
        raise ValueError(f"not an aggregate table (sql/aggregates): {sorted(unknown)}")
    written: dict[str, int] = {}

    def refresh() -> None:
        conn.execute("BEGIN TRANSACTION")
        try:
            rows = _write_aggregates(conn, tables, model_id, corpus, new_batch_id(), _now())
            conn.execute("COMMIT")
        except BaseException:
            _roll_back(conn)
            raise
        written.update(rows)

    retry_on_conflict(refresh, log=_log.warning) if is_lake(conn) else refresh()
    return written


def stale_aggregates(conn: duckdb.DuckDBPyConnection) -> dict[tuple[str, str], list[str]]:
    """Per (model_id, corpus) with facts, the aggregate tables whose current batch is missing,
    older than a current batch of a table it reads, or computed by other code (aggregate_version)."""
    batches = conn.execute("SELECT table_name, model_id, corpus, batch_id, written_at FROM stg_batches").pl()
    stale: dict[tuple[str, str], list[str]] = {}
    for table, sources in aggregate_sources().items():
        facts = (
            batches.filter(pl.col("table_name").is_in(list(sources)))
            .group_by("model_id", "corpus")
            .agg(pl.col("written_at").max().alias("facts_written_at"))
        )
        current = batches.filter(
            pl.col("table_name") == table, pl.col("batch_id").str.starts_with(f"{aggregate_version()}:")
        ).select("model_id", "corpus", "written_at")
        behind = facts.join(current, on=["model_id", "corpus"], how="left").filter(
            pl.col("written_at").is_null() | (pl.col("written_at") < pl.col("facts_written_at"))
        )
        for model_id, corpus in behind.select("model_id", "corpus").sort("model_id", "corpus").iter_rows():
            stale.setdefault((model_id, corpus), []).append(table)
    return stale


def apply_views(conn: duckdb.DuckDBPyConnection) -> list[str]:
    """(Re)create every view in one transaction; idempotent. Returns the view names in creation
    order. On the DuckDB file, rows written before batches existed become one batch per partition.
    In the same transaction, every stale aggregate (stale_aggregates) is recomputed."""
    ensure_schema(conn)
    lake = is_lake(conn)
    created: list[str] = []

    def create() -> None:
        created.clear()
        conn.execute("BEGIN TRANSACTION")
        try:
            if not lake:
                _carry_unbatched_rows(conn)
            _write_claims(conn)
            for view in view_definitions():
                conn.execute(view.sql)
                # COMMENT takes no parameter; the digest is hex of this module's own making.
                conn.execute(f"COMMENT ON VIEW {view.name} IS '{view_digest(view)}'")
                created.append(view.name)
            written_at = _now()
            for (model_id, corpus), tables in stale_aggregates(conn).items():
                _write_aggregates(conn, tables, model_id, corpus, new_batch_id(), written_at)
            conn.execute("COMMIT")
        except BaseException:
            _roll_back(conn)
            raise

    retry_on_conflict(create, log=_log.info) if lake else create()
    return created


def _write_claims(conn: duckdb.DuckDBPyConnection) -> None:
    """Replace the `claims` table's rows by the registry's (inside apply_views' transaction)."""
    frame = claims_frame(load_claims())
    conn.execute("DELETE FROM claims")
    _insert(conn, "claims", frame)


def view_digest(view: View) -> str:
    """The digest of a view's SQL that apply_views marks the view with."""
    return hashlib.sha256(view.sql.encode()).hexdigest()[:16]


def views_are_current(conn: duckdb.DuckDBPyConnection) -> bool:
    """Whether the warehouse holds every view of sql/ as this SQL makes it (each marked with its
    view_digest): a new or moved file has none, one restored from an older copy other ones."""
    marked = dict(
        conn.execute(
            "SELECT view_name, comment FROM duckdb_views() "
            "WHERE database_name = current_database() AND schema_name = 'main' AND NOT internal"
        ).fetchall()
    )
    return all(marked.get(view.name) == view_digest(view) for view in view_definitions())


def held_batches(conn: duckdb.DuckDBPyConnection) -> frozenset[tuple[str, str, str]]:
    """(model_id, corpus, batch_id) of every batch the warehouse holds; none before its first write."""
    try:
        rows = conn.execute(f"SELECT DISTINCT model_id, corpus, batch_id FROM {BATCHES_TABLE}").fetchall()
    except duckdb.CatalogException:
        return frozenset()
    return frozenset(rows)


CARRIED_BATCH = "carried"


def _carry_unbatched_rows(conn: duckdb.DuckDBPyConnection) -> None:
    """Give rows without a batch (a warehouse written before batches) the batch `carried`,
    recorded per partition, so the stg_ views keep showing them."""
    for table in sorted(PARTITIONED_TABLES):
        conn.execute(
            f"INSERT INTO {BATCHES_TABLE} BY NAME SELECT ? AS table_name, model_id, corpus, ? AS batch_id, "
            f"now()::TIMESTAMP AS written_at, count(*) AS n_rows FROM {table} WHERE batch_id IS NULL GROUP BY ALL",
            [table, CARRIED_BATCH],
        )
        conn.execute(f"UPDATE {table} SET batch_id = ? WHERE batch_id IS NULL", [CARRIED_BATCH])


DEFAULT_LOCK_TIMEOUT_SECONDS = 300.0
LOCK_WAIT_MESSAGE = "waiting for the warehouse lock held by another process"
_LOCK_HOLDER = re.compile(r"Conflicting lock is held in (?P<program>.*?) \(PID (?P<pid>\d+)\)")
# What DuckDB (or the OS under it) says when a write finds no room left.
_NO_SPACE = re.compile(r"no space left|disk (is )?full|out of (disk )?space|not enough space|ENOSPC", re.IGNORECASE)


# What DuckDB says where a file the catalog names is not there.
_MISSING_FILE = re.compile(r"Cannot open file .*No such file or directory", re.IGNORECASE)


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
    rows = sum(frame.to_arrow().nbytes for frame in frames.values())
    where = f"the warehouse {database}" if database else "the in-memory warehouse"
    log = _log_bytes(database)
    cause = " ".join(str(error).split())
    reason = "the disk is full" if _NO_SPACE.search(cause) else "the disk refused the write"
    return WarehouseFullError(
        f"could not write partition ({model_id}, {corpus}) to {where}: {reason} ({cause}). "
        f"The new rows take about {_megabytes(rows)} (Arrow) and go to the write-ahead log first, which holds "
        f"{_megabytes(log)} now; merging it into the file needs that much again: about {_megabytes(rows + log)} "
        f"in all{_free_space(database)}. Nothing was written: the partition keeps its previous rows. "
        "Free space on that disk (or point ATTN_WAREHOUSE to a file on a larger one) and re-run."
    )


def _log_bytes(database: Path | None) -> int:
    """The size of the DuckDB file's write-ahead log (0 where there is none)."""
    try:
        return Path(f"{database}.wal").stat().st_size if database else 0
    except OSError:
        return 0


def _free_space(database: Path | None) -> str:
    try:
        return f", {_megabytes(shutil.disk_usage(database.parent).free)} free there now" if database else ""
    except OSError:
        return ""


def _checkpoint(conn: duckdb.DuckDBPyConnection, database: Path | None, model_id: str, corpus: str) -> None:
    """Merge the write-ahead log into the DuckDB file after a write: a finished run never leaves
    it unmerged (closing merges it too, but a failure there is silent). Another transaction of
    this process still open defers it to DuckDB's own next checkpoint."""
    log = _log_bytes(database)
    try:
        conn.execute("CHECKPOINT")
    except duckdb.TransactionException:
        return
    except duckdb.Error as error:
        cause = " ".join(str(error).split())
        if not (isinstance(error, duckdb.IOException) or _NO_SPACE.search(cause)):
            raise
        raise WarehouseFullError(
            f"partition ({model_id}, {corpus}) is committed to the write-ahead log of {database}, but merging the "
            f"log ({_megabytes(log)}) into the file failed ({cause}){_free_space(database)}. Free about "
            f"{_megabytes(log)} on that disk: the next open of the warehouse merges it."
        ) from error


def _lake_data_path(conn: duckdb.DuckDBPyConnection) -> str | None:
    """The attached lake's data path (from its catalog); None when the catalog cannot say."""
    try:
        row = conn.execute(
            "SELECT value FROM ducklake_options(?) WHERE option_name = 'data_path'", [LAKE_NAME]
        ).fetchone()
    except duckdb.Error:
        return None
    return row[0] if row else None


def _lake_write_failure(
    error: duckdb.Error, conn: duckdb.DuckDBPyConnection, frames: dict[str, pl.DataFrame], model_id: str, corpus: str
) -> WarehouseFullError:
    """What a lake write that failed on IO says: where (the data path, or the catalog when the
    data path is not named), why, and what to do. The cause is shown with any password masked."""
    needed = sum(frame.to_arrow().nbytes for frame in frames.values())
    cause = mask_password(" ".join(str(error).split()))
    data_path = _lake_data_path(conn)
    free = ""
    if data_path and "://" not in data_path:
        try:
            free = f"; {_megabytes(shutil.disk_usage(data_path).free)} free there now"
        except OSError:
            pass
    missing = _MISSING_FILE.search(cause)
    if missing:
        return WarehouseFullError(
            f"could not write partition ({model_id}, {corpus}): the DuckLake references a Parquet file that is gone "
            f"({cause}). A committed batch lost its files (deleted by hand, or as orphans by a maintenance pass "
            "beside its writer): this is not disk space. Re-run the assets that wrote that file's partition (its "
            "path names model_id and corpus) to write it anew, then run `warehouse_maintenance`."
        )
    if _NO_SPACE.search(cause) or (data_path and data_path.rstrip("/") in cause):
        where = f"the DuckLake data path {data_path or '(ATTN_LAKE_DATA_PATH)'}"
        reason = "the disk is full" if _NO_SPACE.search(cause) else "the data path refused the write"
        fix = "Free space there (or point ATTN_LAKE_DATA_PATH at a larger store, or fix its permissions) and re-run"
    else:
        where, reason = "the DuckLake", "its catalog or data path failed"
        fix = "Check that the catalog (ATTN_LAKE_CATALOG) and the data path (ATTN_LAKE_DATA_PATH) are up, and re-run"
    return WarehouseFullError(
        f"could not write partition ({model_id}, {corpus}) to {where}: {reason} ({cause}). The new rows take about "
        f"{_megabytes(needed)} in memory (Arrow), and about as much at most as Parquet files{free}. Nothing was "
        "committed: the partition keeps its current batch and `batches` is unchanged; a file the write left "
        f"behind is an orphan that `warehouse_maintenance` deletes. {fix}."
    )


def new_batch_id() -> str:
    return uuid.uuid4().hex


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def replace_partition(
    conn: duckdb.DuckDBPyConnection,
    frames: dict[str, pl.DataFrame],
    model_id: str,
    corpus: str,
    batch_id: str | None = None,
) -> dict[str, int]:
    """Replace the (model_id, corpus) rows of several tables in one transaction: a new batch.

    Either every table gets its new rows or none changes; an empty frame clears the
    partition's rows of its table. Returns rows written per table. On the DuckDB file the
    partition's older rows are deleted in the same transaction; on DuckLake the write only
    appends (it never aborts a concurrent writer) and is retried if DuckLake reports a
    conflict with another transaction. The aggregate tables that read a written table
    (aggregate_sources) get the partition recomputed in the same transaction, once the
    warehouse has this code's views (apply_views recomputes what is stale otherwise).
    """
    unknown = set(frames) - PARTITIONED_TABLES
    if unknown:
        raise ValueError(f"not a partitioned warehouse table: {sorted(unknown)}")
    lake = is_lake(conn)
    if not lake:
        ensure_schema(conn)  # DDL on a lake is the setup step's (apply_views), never a writer's
    database = _database_file(conn)
    batch_id = batch_id or new_batch_id()
    written_at = _now()
    # the aggregates that read what is written, recomputed in the same transaction (never stale)
    aggregates = [table for table, sources in aggregate_sources().items() if sources & set(frames)]

    def write() -> None:
        conn.execute("BEGIN TRANSACTION")
        try:
            _write_batch(conn, frames, model_id, corpus, batch_id, written_at)
            if aggregates and _aggregates_defined(conn):
                _write_aggregates(conn, aggregates, model_id, corpus, batch_id, written_at)
            conn.execute("COMMIT")
        except duckdb.Error as error:
            _roll_back(conn)
            if isinstance(error, duckdb.IOException) or _NO_SPACE.search(str(error)):
                if lake:
                    raise _lake_write_failure(error, conn, frames, model_id, corpus) from error
                raise _write_failure(error, database, frames, model_id, corpus) from error
            if lake and isinstance(error, duckdb.CatalogException):
                raise _lake_not_set_up(error) from error
            raise
        except BaseException:
            _roll_back(conn)
            raise

    if lake:
        retry_on_conflict(write, log=_log.warning)
    else:
        write()
        _checkpoint(conn, database, model_id, corpus)
    return {table: frame.height for table, frame in frames.items()}


def _write_batch(
    conn: duckdb.DuckDBPyConnection,
    frames: dict[str, pl.DataFrame],
    model_id: str,
    corpus: str,
    batch_id: str,
    written_at: datetime,
) -> None:
    """Inside an open transaction: the frames as the partition's rows of their tables, one batch
    recorded in `batches`. On the DuckDB file the partition's older rows and batches are deleted."""
    lake = is_lake(conn)
    for table, frame in frames.items():
        if not lake:
            conn.execute(f"DELETE FROM {table} WHERE model_id = ? AND corpus = ?", [model_id, corpus])
        if not frame.is_empty():
            _insert(
                conn,
                table,
                frame.with_columns(model_id=pl.lit(model_id), corpus=pl.lit(corpus), batch_id=pl.lit(batch_id)),
            )
    if not lake:
        conn.execute(
            f"DELETE FROM {BATCHES_TABLE} WHERE model_id = ? AND corpus = ? AND list_contains(?, table_name)",
            [model_id, corpus, list(frames)],
        )
    batches = pl.DataFrame(
        {
            "table_name": list(frames),
            "model_id": model_id,
            "corpus": corpus,
            "batch_id": batch_id,
            "written_at": written_at,
            "n_rows": [frame.height for frame in frames.values()],
        },
        schema_overrides={"n_rows": pl.Int64, "written_at": pl.Datetime("us")},
    )
    _insert(conn, BATCHES_TABLE, batches)


def _insert(conn: duckdb.DuckDBPyConnection, table: str, frame: pl.DataFrame) -> None:
    conn.register("incoming_rows", frame.to_arrow())
    try:
        conn.execute(insert_statement(table, frame.columns, "incoming_rows"))  # flat-grain rows packed
    finally:
        conn.unregister("incoming_rows")


class LakeNotSetUpError(RuntimeError):
    """The lake lacks a table or view of sql/: its setup step has not run."""


def _lake_not_set_up(error: duckdb.Error) -> LakeNotSetUpError:
    return LakeNotSetUpError(
        f"the DuckLake warehouse is not set up ({' '.join(str(error).split())}): materialize `warehouse_views` "
        "once (it creates the tables, partitions them by (model_id, corpus) and creates the views), then re-run"
    )


def _roll_back(conn: duckdb.DuckDBPyConnection) -> None:
    """ROLLBACK after a failed write; a connection that an IO error left unusable has nothing
    committed to undo, and its error is not the one to report."""
    try:
        conn.execute("ROLLBACK")
    except duckdb.Error as error:
        if "no transaction is active" not in str(error):  # a failed COMMIT has rolled back already
            _log.warning("ROLLBACK after a failed warehouse write failed too: %s", error)


_MODEL_COLUMNS = ("source", "resolved_path", "revision", "model_type", "n_layers", "n_heads", "takes_token_types")


def upsert_model(conn: duckdb.DuckDBPyConnection, spec: ModelSpec) -> None:
    """Record (or refresh) a model's row in the `models` mapping table, keeping its first
    registration time. An unchanged model writes nothing, so re-registering a model (every
    `attn-warehouse run`) never touches a lake that other processes are writing. A spec without a
    `language` (the CLI's) keeps the language stored earlier (models.toml's, via the sensor)."""
    lake = is_lake(conn)
    ensure_schema(conn)  # on a lake, DDL only the first time (registration comes before the views)
    values = {
        "model_id": spec.model_id,
        "source": spec.source,
        "resolved_path": spec.resolved_path,
        "revision": spec.revision,
        "model_type": spec.model_type,
        "n_layers": spec.n_layers,
        "n_heads": spec.n_heads,
        "takes_token_types": spec.takes_token_types,
    }

    def write() -> None:
        conn.execute("BEGIN TRANSACTION")
        try:
            current = conn.execute(
                f"SELECT registered_at, language, {', '.join(_MODEL_COLUMNS)} FROM models WHERE model_id = ?",
                [spec.model_id],
            ).fetchall()
            stored_language = next((row[1] for row in current if row[1] is not None), None)
            record = values | {"language": spec.language or stored_language}
            if len(current) == 1 and current[0][1:] == tuple(record[name] for name in ("language", *_MODEL_COLUMNS)):
                conn.execute("ROLLBACK")
                return
            registered_at = min((row[0] for row in current), default=datetime.now(UTC).replace(tzinfo=None))
            if current:
                conn.execute("DELETE FROM models WHERE model_id = ?", [spec.model_id])
            conn.execute((SQL_DIR / "dml" / "upsert_model.sql").read_text(), record | {"registered_at": registered_at})
            conn.execute("COMMIT")
        except duckdb.CatalogException as error:
            _roll_back(conn)
            raise (_lake_not_set_up(error) if lake else error) from error
        except BaseException:
            _roll_back(conn)
            raise

    retry_on_conflict(write, log=_log.warning) if lake else write()


def record_reproduction(conn: duckdb.DuckDBPyConnection, model_id: str, profile: str) -> None:
    """Record the profile (quick | paper) of a model's finished `attn-warehouse reproduce`."""
    ensure_schema(conn)

    def write() -> None:
        conn.execute("BEGIN TRANSACTION")
        try:
            conn.execute("DELETE FROM reproductions WHERE model_id = ?", [model_id])
            conn.execute(
                (SQL_DIR / "dml" / "record_reproduction.sql").read_text(), {"model_id": model_id, "profile": profile}
            )
            conn.execute("COMMIT")
        except BaseException:
            _roll_back(conn)
            raise

    retry_on_conflict(write, log=_log.warning) if is_lake(conn) else write()


def reproduction_profile(conn: duckdb.DuckDBPyConnection, model_id: str) -> str | None:
    """The profile of a model's last reproduction; None when it was never reproduced."""
    ensure_schema(conn)
    row = conn.execute("SELECT profile FROM reproductions WHERE model_id = ?", [model_id]).fetchone()
    return None if row is None else row[0]


def model_source(conn: duckdb.DuckDBPyConnection, model_id: str) -> str:
    """The hub id or path registered for a partition key."""
    if not is_lake(conn):
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
    """Rows of a table or view for one model (and corpus), through DuckDB's relational API. A
    partitioned table gives its current batch's rows (on DuckLake, where replaced batches stay
    until maintenance), without the `batch_id` column."""
    condition = duckdb.ColumnExpression("model_id") == duckdb.ConstantExpression(model_id)
    if corpus is not None:
        condition = condition & (duckdb.ColumnExpression("corpus") == duckdb.ConstantExpression(corpus))
    rows = conn.table(relation).filter(condition)
    if relation in PARTITIONED_TABLES:
        if is_lake(conn):
            current = (
                conn.table("stg_batches")
                .filter(duckdb.ColumnExpression("table_name") == duckdb.ConstantExpression(relation))
                .select("batch_id")
            )
            rows = rows.join(current, "batch_id", how="semi")
        columns = columns or tuple(column for column in rows.columns if column != "batch_id")
    return (rows.select(*columns) if columns else rows).pl()


def expire_replaced_batches(conn: duckdb.DuckDBPyConnection) -> dict[str, int]:
    """Delete the rows of batches that a later write replaced, table by table (one short
    transaction each, retried on a conflict with a concurrent writer, which DuckLake aborts
    or is aborted by when both touch one table), and their `batches` rows. Returns the rows
    deleted per table. The DuckDB file has none: its writes delete them."""
    deleted = {}
    for table in sorted(PARTITIONED_TABLES) + [BATCHES_TABLE]:

        def expire(table: str = table) -> None:
            conn.execute("BEGIN TRANSACTION")
            try:
                (count,) = conn.execute(
                    f"DELETE FROM {table} AS t WHERE NOT EXISTS (SELECT 1 FROM stg_batches AS b "
                    f"WHERE b.table_name = {'t.table_name' if table == BATCHES_TABLE else '?'} "
                    "AND b.batch_id = t.batch_id)",
                    [] if table == BATCHES_TABLE else [table],
                ).fetchone()
                conn.execute("COMMIT")
                deleted[table] = count
            except BaseException:
                _roll_back(conn)
                raise

        retry_on_conflict(expire, log=_log.info)
    return {table: count for table, count in deleted.items() if count}
