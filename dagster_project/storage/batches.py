"""The batches of the partitions: the rows of the current one (partition_rows), every batch a
warehouse holds (held_batches), and the deletion of the batches a later write replaced
(expire_replaced_batches, on DuckLake, where writes only append)."""

import logging

import duckdb
import polars as pl

from dagster_project.storage.connections import roll_back
from dagster_project.storage.lake import holding_write_lock, is_lake, retry_on_conflict
from dagster_project.storage.schema import BATCHES_TABLE, PARTITIONED_TABLES

_log = logging.getLogger(__name__)


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


def held_batches(conn: duckdb.DuckDBPyConnection) -> frozenset[tuple[str, str, str]]:
    """(model_id, corpus, batch_id) of every batch the warehouse holds; none before its first write."""
    try:
        rows = conn.execute(f"SELECT DISTINCT model_id, corpus, batch_id FROM {BATCHES_TABLE}").fetchall()
    except duckdb.CatalogException:
        return frozenset()
    return frozenset(rows)


@holding_write_lock
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
                roll_back(conn)
                raise

        retry_on_conflict(expire, log=_log.info)
    return {table: count for table, count in deleted.items() if count}
