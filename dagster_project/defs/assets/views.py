"""The SQL layer: every table and view of sql/, (re)created idempotently."""

from dagster import AssetExecutionContext, MaterializeResult, MetadataValue, asset
from dagster_duckdb import DuckDBResource

from dagster_project.defs.pools import WRITER_POOL
from dagster_project.settings import SQL_DIR
from dagster_project.storage.warehouse import apply_views, sql_code_version


@asset(group_name="views", code_version=sql_code_version(), pool=WRITER_POOL)
def warehouse_views(context: AssetExecutionContext, warehouse: DuckDBResource) -> MaterializeResult:
    """Creates the fact tables if missing and runs every `CREATE OR REPLACE VIEW` file of
    sql/staging, sql/intermediate and sql/results in dependency order."""
    with warehouse.get_connection() as conn:
        views = apply_views(conn)
    context.log.info(f"Created {len(views)} views from {SQL_DIR}")
    return MaterializeResult(
        metadata={
            "n_views": len(views),
            "views": MetadataValue.md("\n".join(f"- `{name}`" for name in views)),
            "sql_dir": MetadataValue.path(str(SQL_DIR)),
        }
    )
