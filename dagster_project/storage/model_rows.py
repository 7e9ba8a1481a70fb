"""The rows of the `models` mapping table (a model registered per partition key) and of
`reproductions` (the profile of a model's last `attn-warehouse reproduce`)."""

import logging
from datetime import UTC, datetime

import duckdb

from dagster_project.compute.models import ModelSpec
from dagster_project.settings import SQL_DIR
from dagster_project.storage.connections import lake_not_set_up, roll_back
from dagster_project.storage.lake import holding_write_lock, is_lake, retry_on_conflict
from dagster_project.storage.schema import ensure_schema

_log = logging.getLogger(__name__)


_MODEL_COLUMNS = ("source", "resolved_path", "revision", "model_type", "n_layers", "n_heads", "takes_token_types")


@holding_write_lock
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
            roll_back(conn)
            raise (lake_not_set_up(error) if lake else error) from error
        except BaseException:
            roll_back(conn)
            raise

    retry_on_conflict(write, log=_log.warning) if lake else write()


@holding_write_lock
def record_reproduction(conn: duckdb.DuckDBPyConnection, model_id: str, profile: str, finished: bool = True) -> None:
    """Record the profile (quick | paper) of a model's `attn-warehouse reproduce`: finished (it
    replaces what was recorded), or started (`finished` false: it replaces only an unfinished one, so
    the last finished profile still labels the rows until this one finishes)."""
    ensure_schema(conn)

    def write() -> None:
        conn.execute("BEGIN TRANSACTION")
        try:
            conn.execute(
                "DELETE FROM reproductions WHERE model_id = $model_id AND ($finished OR NOT coalesce(finished, true))",
                {"model_id": model_id, "finished": finished},
            )
            conn.execute(
                (SQL_DIR / "dml" / "record_reproduction.sql").read_text(),
                {"model_id": model_id, "profile": profile, "finished": finished},
            )
            conn.execute("COMMIT")
        except BaseException:
            roll_back(conn)
            raise

    retry_on_conflict(write, log=_log.warning) if is_lake(conn) else write()


def reproduction_profile(conn: duckdb.DuckDBPyConnection, model_id: str) -> str | None:
    """The profile of a model's last reproduction, finished or not (an interrupted quick one wrote
    quick rows too); None when it was never reproduced."""
    ensure_schema(conn)
    row = conn.execute(
        "SELECT profile FROM reproductions WHERE model_id = ? ORDER BY reproduced_at DESC LIMIT 1", [model_id]
    ).fetchone()
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
