"""Views applied to a warehouse: apply_views (re)creates every view of sql/ in one transaction,
marked with the digest of its SQL, and recomputes the stale aggregates; views_are_current says
whether a warehouse holds this SQL's views."""

import logging

import duckdb

from dagster_project.storage.aggregates import stale_aggregates
from dagster_project.storage.claims import claims_frame, load_claims
from dagster_project.storage.connections import roll_back
from dagster_project.storage.lake import holding_write_lock, is_lake, retry_on_conflict
from dagster_project.storage.partition_writes import insert_frame, new_batch_id, utc_now, write_aggregates
from dagster_project.storage.schema import BATCHES_TABLE, PARTITIONED_TABLES, ensure_schema
from dagster_project.storage.sql_files import view_definitions, view_digest

_log = logging.getLogger(__name__)


@holding_write_lock
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
            written_at = utc_now()
            for (model_id, corpus), tables in stale_aggregates(conn).items():
                write_aggregates(conn, tables, model_id, corpus, new_batch_id(), written_at)
            conn.execute("COMMIT")
        except BaseException:
            roll_back(conn)
            raise

    retry_on_conflict(create, log=_log.info) if lake else create()
    return created


def _write_claims(conn: duckdb.DuckDBPyConnection) -> None:
    """Replace the `claims` table's rows by the registry's (inside apply_views' transaction)."""
    frame = claims_frame(load_claims())
    conn.execute("DELETE FROM claims")
    insert_frame(conn, "claims", frame)


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
