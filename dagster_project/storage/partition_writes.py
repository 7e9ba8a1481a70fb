"""Partition-replacing writes through Arrow: every write is a batch, its rows carrying a
`batch_id` recorded in `batches` in the same transaction. On the DuckDB file the write also
deletes the partition's older rows; on DuckLake it only appends (a delete aborts concurrent
inserts into the same table) and the stg_ views show each partition's current batch. The
aggregates that read what is written are recomputed in the same transaction. A write computed
from a partition's examples commits only while they are still current (checked in its own
transaction). A write that fails on IO says where, why, how much it needed and what to do."""

import logging
import re
import shutil
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import polars as pl

from dagster_project.storage.aggregates import (
    AGGREGATE_TABLES,
    aggregate_batch_id,
    aggregate_rows,
    aggregate_sources,
    aggregates_defined,
)
from dagster_project.storage.batches import require_current_examples
from dagster_project.storage.connections import WarehouseFullError, lake_not_set_up, roll_back
from dagster_project.storage.dense_grain import insert_statement
from dagster_project.storage.lake import LAKE_NAME, holding_write_lock, is_lake, mask_password, retry_on_conflict
from dagster_project.storage.schema import BATCHES_TABLE, PARTITIONED_TABLES, ensure_schema

_log = logging.getLogger(__name__)

# What DuckDB (or the OS under it) says when a write finds no room left.
_NO_SPACE = re.compile(r"no space left|disk (is )?full|out of (disk )?space|not enough space|ENOSPC", re.IGNORECASE)


# What DuckDB says where a file the catalog names is not there.
_MISSING_FILE = re.compile(r"Cannot open file .*No such file or directory", re.IGNORECASE)


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
        f"{_megabytes(log)} now; merging the log ({_megabytes(rows + log)} then) into the file needs that much "
        f"again: about {_megabytes(2 * rows + log)} free in all{_free_space(database)}. Nothing was written: "
        "the partition keeps its previous rows. "
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
    """A fresh `batch_id`, shared by every table one write fills."""
    return uuid.uuid4().hex


def utc_now() -> datetime:
    """The current UTC time without a zone, as the TIMESTAMP column `written_at` holds it."""
    return datetime.now(UTC).replace(tzinfo=None)


@holding_write_lock
def replace_partition(
    conn: duckdb.DuckDBPyConnection,
    frames: dict[str, pl.DataFrame],
    model_id: str,
    corpus: str,
    batch_id: str | None = None,
    examples: Mapping[str, str] | None = None,
) -> dict[str, int]:
    """Replace the (model_id, corpus) rows of several tables in one transaction: a new batch.

    Either every table gets its new rows or none changes; an empty frame clears the
    partition's rows of its table. Returns rows written per table. `examples` (corpus -> batch
    id) names the examples of model_id the rows were computed from: the transaction checks they
    are still current before it writes (ExamplesReplacedError otherwise, nothing written), so a
    run never commits rows over examples another run wrote meanwhile, and `batches` records the
    partition's own corpus's (examples_batch_id). On the DuckDB file the
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
    written_at = utc_now()
    # the aggregates that read what is written, recomputed in the same transaction (never stale)
    aggregates = [table for table, sources in aggregate_sources().items() if sources & set(frames)]

    def write() -> None:
        conn.execute("BEGIN TRANSACTION")
        try:
            require_current_examples(conn, model_id, examples or {})
            _write_batch(conn, frames, model_id, corpus, batch_id, written_at, (examples or {}).get(corpus))
            if aggregates and aggregates_defined(conn):
                write_aggregates(conn, aggregates, model_id, corpus, batch_id, written_at)
            conn.execute("COMMIT")
        except duckdb.Error as error:
            roll_back(conn)
            if isinstance(error, duckdb.IOException) or _NO_SPACE.search(str(error)):
                if lake:
                    raise _lake_write_failure(error, conn, frames, model_id, corpus) from error
                raise _write_failure(error, database, frames, model_id, corpus) from error
            if lake and isinstance(error, duckdb.CatalogException):
                raise lake_not_set_up(error) from error
            raise
        except BaseException:
            roll_back(conn)
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
    examples_batch_id: str | None = None,
) -> None:
    """Inside an open transaction: the frames as the partition's rows of their tables, one batch
    recorded in `batches` (with the examples batch they were computed from, if any). On the DuckDB
    file the partition's older rows and batches are deleted."""
    lake = is_lake(conn)
    for table, frame in frames.items():
        if not lake:
            conn.execute(f"DELETE FROM {table} WHERE model_id = ? AND corpus = ?", [model_id, corpus])
        if not frame.is_empty():
            insert_frame(
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
            "examples_batch_id": examples_batch_id,
        },
        schema_overrides={"n_rows": pl.Int64, "written_at": pl.Datetime("us"), "examples_batch_id": pl.String},
    )
    insert_frame(conn, BATCHES_TABLE, batches)


def insert_frame(conn: duckdb.DuckDBPyConnection, table: str, frame: pl.DataFrame) -> None:
    """Insert a frame's rows into `table` through Arrow, by column name (rows in the flat grain
    packed into a dense table's lists)."""
    conn.register("incoming_rows", frame.to_arrow())
    try:
        conn.execute(insert_statement(table, frame.columns, "incoming_rows"))
    finally:
        conn.unregister("incoming_rows")


def write_aggregates(
    conn: duckdb.DuckDBPyConnection, tables: list[str], model_id: str, corpus: str, batch_id: str, written_at: datetime
) -> dict[str, int]:
    """Recompute the aggregate tables' (model_id, corpus) partition from the facts as they are in
    the open transaction, and write it as a batch whose id carries aggregate_version(). Returns
    the rows written per table."""
    frames = {table: aggregate_rows(conn, table, model_id, corpus) for table in tables}
    _write_batch(conn, frames, model_id, corpus, aggregate_batch_id(batch_id), written_at)
    return {table: frame.height for table, frame in frames.items()}


@holding_write_lock
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
            rows = write_aggregates(conn, tables, model_id, corpus, new_batch_id(), utc_now())
            conn.execute("COMMIT")
        except BaseException:
            roll_back(conn)
            raise
        written.update(rows)

    retry_on_conflict(refresh, log=_log.warning) if is_lake(conn) else refresh()
    return written
