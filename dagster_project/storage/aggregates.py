"""The materialized aggregates: a table of sql/schema per file of sql/aggregates, whose query
computes one (model_id, corpus) partition of it from the facts (through stg_/int_ views) with the
named parameters $model_id and $corpus. A query giving an `example_id` column gives per-example
sums (compute/bootstrap.py summarize_units turns them into ratios with bootstrap intervals); any
other gives the table's rows as they are. Which code computed a batch is in its id
(aggregate_batch_id), so a change of SQL or bootstrap settings makes it stale."""

import functools
import hashlib

import duckdb
import polars as pl

from dagster_project.compute import bootstrap
from dagster_project.settings import SQL_DIR
from dagster_project.storage.schema import PARTITIONED_TABLES
from dagster_project.storage.sql_files import aggregate_files, sql_code_version, staged_table, views_reached


@functools.cache
def aggregate_version() -> str:
    """What an aggregate's rows were computed by: every SQL file and the bootstrap's settings. It
    prefixes the aggregate batches' ids, so apply_views recomputes the aggregates after either changes."""
    settings = f"{bootstrap.N_RESAMPLES}/{bootstrap.SEED}/{bootstrap.LEVEL}"
    return hashlib.sha256(f"{sql_code_version()}/{settings}".encode()).hexdigest()[:12]


def aggregate_batch_id(batch_id: str) -> str:
    """The id of an aggregate batch written beside the facts' batch `batch_id`: prefixed with the
    aggregate_version() that computed it."""
    return f"{aggregate_version()}:{batch_id}"


AGGREGATE_TABLES = tuple(path.stem for path in aggregate_files())
_unknown_aggregates = set(AGGREGATE_TABLES) - set(PARTITIONED_TABLES)
if _unknown_aggregates:
    raise ValueError(f"sql/aggregates/{sorted(_unknown_aggregates)}.sql fill no partitioned table of sql/schema")


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


def aggregates_defined(conn: duckdb.DuckDBPyConnection) -> bool:
    """Whether the warehouse has this code's views (the staging views of the aggregate tables are
    among them), which the aggregate queries read; before apply_views has run, it has not."""
    (count,) = conn.execute(
        "SELECT count(*) FROM duckdb_views() WHERE database_name = current_database() AND list_contains(?, view_name)",
        [[f"stg_{table}" for table in AGGREGATE_TABLES]],
    ).fetchone()
    return count == len(AGGREGATE_TABLES)


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
            pl.col("table_name") == table, pl.col("batch_id").str.starts_with(aggregate_batch_id(""))
        ).select("model_id", "corpus", "written_at")
        behind = facts.join(current, on=["model_id", "corpus"], how="left").filter(
            pl.col("written_at").is_null() | (pl.col("written_at") < pl.col("facts_written_at"))
        )
        for model_id, corpus in behind.select("model_id", "corpus").sort("model_id", "corpus").iter_rows():
            stale.setdefault((model_id, corpus), []).append(table)
    return stale
