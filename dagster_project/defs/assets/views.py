"""The SQL layer: every table and view of sql/, (re)created idempotently; and the warehouse's
maintenance (replaced batches and old DuckLake snapshots and files removed, small files merged)."""

from datetime import timedelta

from dagster import AssetExecutionContext, Config, MaterializeResult, MetadataValue, asset
from dagster_duckdb import DuckDBResource
from pydantic import Field

from dagster_project.defs.pools import WRITER_POOL
from dagster_project.defs.provenance import VIEWS_SQL_VERSION
from dagster_project.settings import SQL_DIR
from dagster_project.storage.batches import expire_replaced_batches
from dagster_project.storage.lake import is_lake, maintain_files
from dagster_project.storage.sql_files import sql_code_version
from dagster_project.storage.views import apply_views


@asset(group_name="views", code_version=sql_code_version(), pool=WRITER_POOL)
def warehouse_views(context: AssetExecutionContext, warehouse: DuckDBResource) -> MaterializeResult:
    """Creates the fact tables if missing and runs every `CREATE OR REPLACE VIEW` file of
    sql/staging, sql/intermediate and sql/results in dependency order; then recomputes every
    stale aggregate partition (sql/aggregates: missing, older than its facts, or computed by
    other SQL), so the results views never read an out-of-date aggregate."""
    with warehouse.get_connection() as conn:
        views = apply_views(conn)
    context.log.info(f"Created {len(views)} views from {SQL_DIR}")
    return MaterializeResult(
        metadata={
            "n_views": len(views),
            "views": MetadataValue.md("\n".join(f"- `{name}`" for name in views)),
            "sql_dir": MetadataValue.path(str(SQL_DIR)),
            VIEWS_SQL_VERSION: sql_code_version(),
        }
    )


class MaintenanceConfig(Config):
    keep_hours: float = Field(
        default=24.0,
        ge=0,
        description="DuckLake snapshots (time travel) and unreferenced files younger than this are kept: "
        "longer than any query that may still read them. Orphaned files (referenced by no snapshot) are kept at "
        "least an hour whatever this says: a running writer's files look the same until it commits.",
    )


@asset(group_name="views", pool=WRITER_POOL)
def warehouse_maintenance(
    context: AssetExecutionContext, config: MaintenanceConfig, warehouse: DuckDBResource
) -> MaterializeResult:
    """On DuckLake: deletes the rows of batches that later writes replaced (writers only
    append), then expires old snapshots, merges small Parquet files, rewrites files that deletes
    emptied and removes files nothing references. Safe beside running writers: a conflicting
    transaction is retried. On the DuckDB file there is nothing to do (writes delete replaced rows)."""
    with warehouse.get_connection() as conn:
        if not is_lake(conn):
            context.log.info("DuckDB file backend: replaced rows are deleted by the writes; nothing to maintain")
            return MaterializeResult(metadata={"backend": "duckdb"})
        deleted = expire_replaced_batches(conn)
        files = maintain_files(conn, timedelta(hours=config.keep_hours))
    context.log.info(f"deleted replaced rows {deleted}; files {files}")
    return MaterializeResult(
        metadata={"backend": "ducklake", "replaced_rows_deleted": sum(deleted.values()), **files}
        | {f"{table}_rows_deleted": count for table, count in deleted.items()}
    )
