"""The batches of the partitions: the rows of the current one (partition_rows), every batch a
warehouse holds (held_batches), the current batch of a partition's examples and the check that a
write's examples are still it (require_current_examples), and the deletion of the batches a later
write replaced (expire_replaced_batches, on DuckLake, where writes only append)."""

import logging
from collections.abc import Mapping

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


EXAMPLES_TABLE = "examples"


class ExamplesReplacedError(RuntimeError):
    """The examples a step computed from are no longer the partition's: another run wrote new ones."""


def current_batch(conn: duckdb.DuckDBPyConnection, table: str, model_id: str, corpus: str) -> str | None:
    """The batch id of the current rows of (model_id, corpus) in `table` (stg_batches' rule, read
    from the table itself: no views needed); None before its first write."""
    try:
        row = conn.execute(
            f"SELECT batch_id FROM {BATCHES_TABLE} WHERE table_name = ? AND model_id = ? AND corpus = ? "
            "ORDER BY written_at DESC, batch_id DESC LIMIT 1",
            [table, model_id, corpus],
        ).fetchone()
    except duckdb.CatalogException:
        return None
    return row[0] if row else None


def require_current_examples(conn: duckdb.DuckDBPyConnection, model_id: str, examples: Mapping[str, str]) -> None:
    """Raise ExamplesReplacedError unless the examples of model_id are still, per corpus of
    `examples`, the batch given (the one a step computed from)."""
    for corpus, batch_id in examples.items():
        current = current_batch(conn, EXAMPLES_TABLE, model_id, corpus)
        if current != batch_id:
            now = f"batch {current}" if current else "none"
            raise ExamplesReplacedError(
                f"the {corpus} examples of {model_id} that this step works from (batch {batch_id}) were replaced by "
                f"another run (the warehouse now holds {now}): nothing was written, so no rows describe examples "
                "this run did not sample. The warehouse keeps the other run's examples, whose own steps write "
                "their rows; re-run this command once that run ends to have this run's settings."
            )


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
