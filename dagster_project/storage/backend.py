"""Which warehouse backend, from the environment: ATTN_WAREHOUSE_BACKEND chooses it.

- `duckdb` (the default): one DuckDB file, ATTN_WAREHOUSE (default warehouse.duckdb). One
  writing process at a time.
- `ducklake`: a DuckLake with its catalog at ATTN_LAKE_CATALOG (postgresql://user:password@host/db,
  a .sqlite file, or a DuckDB file such as lake.ducklake) and its Parquet files under
  ATTN_LAKE_DATA_PATH (a folder or s3://bucket/prefix/; S3 endpoint and credentials from the
  standard AWS_* variables). Many processes write different (model, corpus) partitions at once.

Both give a DuckDB connection on which the same SQL of sql/ runs, and the functions of the
other storage modules work on either.
"""

import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import duckdb

from dagster_project import settings
from dagster_project.storage.connections import confine_reader
from dagster_project.storage.lake import NO_DOWNLOADS, LakeConfig, LakeConfigError, connect_lake

BACKEND_SETTING = "ATTN_WAREHOUSE_BACKEND"
CATALOG_SETTING = "ATTN_LAKE_CATALOG"
DATA_PATH_SETTING = "ATTN_LAKE_DATA_PATH"
BACKENDS = ("duckdb", "ducklake")
# How long a reader of the DuckDB file waits for a writer's lock, and how often it tries.
READ_LOCK_WAIT_SECONDS = 5.0
READ_LOCK_POLL_SECONDS = 0.05


# The one kind of statement a read-only visit runs: SELECT, and what DuckDB parses as one (WITH,
# VALUES, FROM-first, DESCRIBE, SHOW, SUMMARIZE, PRAGMA table_info).
READ_STATEMENTS = frozenset({duckdb.StatementType.SELECT})
# Table functions a SELECT may call that are not reads, by what they do; a name matches with or
# without DuckLake's `ducklake_` prefix (a lake also offers them as lake.merge_adjacent_files()).
# A read-only DuckLake attachment does not stop them: a merge writes its Parquet files before its
# commit fails, set_option crashes the process. Refused by name before DuckDB binds the query.
REFUSED_FUNCTIONS = {
    "writes, merges or deletes the lake's files or snapshots (the warehouse_maintenance asset maintains them)": (
        "add_data_files",
        "cleanup_old_files",
        "commit",
        "delete_orphaned_files",
        "expire_snapshots",
        "flush_inlined_data",
        "merge_adjacent_files",
        "rewrite_data_files",
        "set_commit_message",
    ),
    "checkpoints a database": ("checkpoint", "force_checkpoint"),
    "sets options": (
        "set_option",
        "enable_logging",
        "disable_logging",
        "truncate_duckdb_logs",
        "enable_profiling",
        "disable_profiling",
        "postgres_configure_pool",
        "pg_clear_cache",
    ),
    "runs SQL given as a string, or on another database": (
        "query",
        "json_execute_serialized_sql",
        "postgres_execute",
        "postgres_query",
        "postgres_attach",
        "sqlite_query",
        "sqlite_attach",
    ),
}
_REFUSED = {name: what for what, names in REFUSED_FUNCTIONS.items() for name in names}
READ_QUERY_FORMS = "one SELECT (or WITH, DESCRIBE, SHOW) statement"


class ReadOnlyQueryError(ValueError):
    """A query a read-only visit does not run: not one statement, not a read, or one that calls a
    function that writes (REFUSED_FUNCTIONS)."""


def check_read_query(conn: duckdb.DuckDBPyConnection, query: str) -> None:
    """Raise ReadOnlyQueryError unless `query` is one reading statement (READ_STATEMENTS) that calls
    none of REFUSED_FUNCTIONS, anywhere in it (subqueries, CTEs, lambdas). Only DuckDB's parser sees
    the query here. A read-only DuckLake attachment alone does not stop a statement from detaching
    it and attaching it writable, nor COPY ... TO from writing files, on either backend."""
    try:
        statements = conn.extract_statements(query)
    except duckdb.ParserException as error:
        raise ReadOnlyQueryError(" ".join(str(error).split())) from None
    if not statements:
        raise ReadOnlyQueryError(f"the query is empty: give {READ_QUERY_FORMS}")
    kinds = [statement.type.name for statement in statements]
    if len(statements) > 1 or statements[0].type not in READ_STATEMENTS:
        raise ReadOnlyQueryError(
            f"a read-only query is {READ_QUERY_FORMS}, not {' + '.join(kinds)}; "
            "write results to files with `attn-warehouse export`"
        )
    for name in sorted(_functions_called(conn, statements[0].query)):
        what = _REFUSED.get(name.removeprefix("ducklake_"))
        if what:
            raise ReadOnlyQueryError(f"a read-only query does not call {name}(): it {what}")


def _functions_called(conn: duckdb.DuckDBPyConnection, statement: str) -> set[str]:
    """The names (lower case, without catalog or schema) of every function `statement` calls, read
    from DuckDB's parse tree (json_serialize_sql parses, and binds or runs nothing)."""
    (tree,) = conn.execute("SELECT json_serialize_sql(?)", [statement]).fetchone()
    parsed = json.loads(tree)
    if parsed.get("error"):
        raise ReadOnlyQueryError(
            f"the query cannot be checked as a read ({parsed.get('error_message')}): give {READ_QUERY_FORMS}"
        )
    names: set[str] = set()
    pending = [parsed]
    while pending:
        node = pending.pop()
        if isinstance(node, dict):
            if isinstance(node.get("function_name"), str):
                names.add(node["function_name"].lower())
            pending.extend(node.values())
        elif isinstance(node, list):
            pending.extend(node)
    return names


def warehouse_backend(env: Mapping[str, str] = os.environ) -> str:
    """The configured backend (ATTN_WAREHOUSE_BACKEND; default duckdb), checked."""
    backend = env.get(BACKEND_SETTING, "").strip().lower() or "duckdb"
    if backend not in BACKENDS:
        raise LakeConfigError(f"{BACKEND_SETTING}={backend!r} is not a warehouse backend: use one of {BACKENDS}")
    return backend


@dataclass(frozen=True)
class WarehouseConfig:
    """The warehouse: `database` (the DuckDB file) for `duckdb`, `lake` for `ducklake`."""

    backend: str
    database: str
    lake: LakeConfig | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> "WarehouseConfig":
        """The warehouse the environment configures: the DuckDB file, or with
        ATTN_WAREHOUSE_BACKEND=ducklake the lake at ATTN_LAKE_CATALOG and ATTN_LAKE_DATA_PATH; a
        LakeConfigError names either when it is missing."""
        backend = warehouse_backend(env)
        database = str(settings.warehouse_path())
        if backend == "duckdb":
            return cls(backend, database)
        missing = [name for name in (CATALOG_SETTING, DATA_PATH_SETTING) if not env.get(name, "").strip()]
        if missing:
            raise LakeConfigError(
                f"{BACKEND_SETTING}=ducklake needs {' and '.join(missing)}: the catalog (postgresql://user:password@"
                "host:port/db, a .sqlite file or a .ducklake DuckDB file) and the data path (a folder or "
                "s3://bucket/prefix/)"
            )
        return cls(backend, database, LakeConfig(env[CATALOG_SETTING].strip(), env[DATA_PATH_SETTING].strip()))

    def describe(self) -> str:
        """The warehouse in a few words for messages and manifests (a lake's catalog password masked)."""
        return f"DuckLake ({self.lake.describe()})" if self.lake else f"DuckDB file {self.database}"

    def exists(self) -> bool:
        """Whether there is a warehouse to read (a PostgreSQL catalog is checked when connecting)."""
        return not self.lake.catalog_missing() if self.lake else Path(self.database).exists()

    def missing_message(self) -> str:
        """What a reader says where there is no warehouse yet, and how to create it."""
        if self.lake:
            return self.lake.missing_message()
        return f"no warehouse at {self.database}: run `attn-warehouse run` first (or set ATTN_WAREHOUSE)"

    def connect_read_only(self, wait_seconds: float = READ_LOCK_WAIT_SECONDS) -> duckdb.DuckDBPyConnection:
        """A read-only connection that opens no file but the warehouse's own and loads no extension
        (confine_reader): the DuckDB file opened read-only, or the lake attached READ_ONLY
        (LakeMissingError where there is no lake yet). A writer holds the DuckDB file's lock
        for each write, so a reader beside it tries again for up to `wait_seconds`."""
        if self.lake is not None:
            return connect_lake(self.lake, read_only=True)
        deadline = time.monotonic() + wait_seconds
        while True:
            try:
                # no secrets stored on the machine (~/.duckdb/stored_secrets): nothing to read there
                conn = duckdb.connect(
                    self.database, read_only=True, config={**NO_DOWNLOADS, "allow_persistent_secrets": False}
                )
                break
            except duckdb.IOException as error:
                if "could not set lock" not in str(error).lower() or time.monotonic() >= deadline:
                    raise
            time.sleep(READ_LOCK_POLL_SECONDS)
        try:
            confine_reader(conn, paths=[], directories=[])
        except BaseException:
            conn.close()
            raise
        return conn
