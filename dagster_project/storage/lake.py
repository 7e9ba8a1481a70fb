"""The DuckLake backend: a catalog (a DuckDB file, a SQLite file or a PostgreSQL database) and
a data path (a local folder or s3://) shared by many writers and readers.

Extensions come from the pip packages `duckdb-extension-<name>` and are loaded from their
installed files; DuckDB's automatic install and load are switched off, so nothing is
downloaded at run time. S3 endpoint and credentials come from the standard AWS environment
variables. Every failure to reach the catalog or the data path is raised as LakeConfigError
naming the catalog (password masked) or the path, before anything is written. A reader's DuckDB
opens no file but the lake's own (its catalog file and data path) once attached.
"""

import functools
import importlib.util
import os
import random
import re
import time
import uuid
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Concatenate, ParamSpec, TypeVar
from urllib.parse import urlsplit

import duckdb
from filelock import FileLock, Timeout

from dagster_project.storage.connections import DEFAULT_LOCK_TIMEOUT_SECONDS, WarehouseLockedError, confine_reader

T = TypeVar("T")
R = TypeVar("R")
P = ParamSpec("P")

LAKE_NAME = "lake"  # the database name the lake is attached under (`USE lake`)
_SECRET_NAME = "attn_lake"
# DuckDB extension -> the pip package shipping it (its files under <package>/extensions/v<duckdb version>/).
EXTENSION_PACKAGES = {
    "ducklake": "duckdb-extension-ducklake",
    "postgres_scanner": "duckdb-extension-postgres-scanner",
    "sqlite_scanner": "duckdb-extension-sqlite-scanner",
    "httpfs": "duckdb-extension-httpfs",
}
# Never download or auto-load an extension: a missing package is a configuration error.
NO_DOWNLOADS = {"autoinstall_known_extensions": False, "autoload_known_extensions": False}
_PASSWORD_IN_URL = re.compile(r"(?P<head>[a-z][a-z0-9+.-]*://[^:/@\s]*:)(?P<password>[^@\s]*)(?P<tail>@)", re.I)
# A libpq key=value connection string (`dbname=lake host=db user=me`): a PostgreSQL catalog, not a file name.
_LIBPQ_KEY_VALUE = re.compile(
    r"\s*(host|hostaddr|port|dbname|user|password|passfile|service|sslmode|connect_timeout|options)\s*=", re.I
)
_PASSWORD_IN_DSN = re.compile(r"(?P<head>\bpassword\s*=\s*)(?P<password>'(?:[^']|\\')*'|\S+)(?P<tail>)", re.I)
# Failures that a transaction (rolled back by them) can be retried as it was: DuckLake's logical
# conflict between two transactions (an insert into a table another transaction deleted from),
# and SQLite's busy catalog file (a SQLite catalog takes one committing transaction at a time, and
# a read that meets one fails the same way).
RETRYABLE = re.compile(r"transaction conflict|database is locked", re.IGNORECASE)


class LakeConfigError(RuntimeError):
    """The lake cannot be used as configured (catalog, extensions, data path); nothing was written."""


class LakeMissingError(LakeConfigError):
    """A reader found no DuckLake at the configured catalog: no run has created it yet."""


# DuckLake's answer to a read-only ATTACH of a catalog (an empty database) that holds no lake.
_NO_LAKE_IN_CATALOG = re.compile(r"does not exist - and creating a new DuckLake is explicitly disabled", re.I)


def mask_password(text: str) -> str:
    """`text` with the password of any URL (user:password@) or libpq `password=` replaced by ***."""
    text = _PASSWORD_IN_URL.sub(lambda m: f"{m['head']}***{m['tail']}", text)
    return _PASSWORD_IN_DSN.sub(lambda m: f"{m['head']}***", text)


@dataclass(frozen=True)
class S3Settings:
    """S3 access from the standard AWS variables; `endpoint` for S3-compatible stores (MinIO, moto, R2)."""

    key_id: str | None
    secret: str | None
    session_token: str | None
    region: str
    endpoint: str | None  # host:port, without the scheme
    use_ssl: bool

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> "S3Settings":
        """The S3 settings of the standard AWS variables; the endpoint of AWS_ENDPOINT_URL_S3 (else
        AWS_ENDPOINT_URL), with SSL unless its scheme is http; region us-east-1 unless set."""
        url = env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL") or ""
        parts = urlsplit(url if "://" in url else f"https://{url}") if url else None
        return cls(
            key_id=env.get("AWS_ACCESS_KEY_ID") or None,
            secret=env.get("AWS_SECRET_ACCESS_KEY") or None,
            session_token=env.get("AWS_SESSION_TOKEN") or None,
            region=env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or "us-east-1",
            endpoint=parts.netloc if parts else None,
            use_ssl=parts is None or parts.scheme == "https",
        )


@dataclass(frozen=True, repr=False)
class LakeConfig:
    """Where the lake lives. `catalog`: postgresql://user:password@host:port/db (or postgres://, or
    libpq's `dbname=db host=host user=user`), a SQLite file (.sqlite, .sqlite3, .db) or a DuckDB
    file (anything else, e.g. lake.ducklake).
    `data_path`: a folder or s3://bucket/prefix/. Tables are partitioned by (model_id, corpus), so
    their Parquet files lie under <data_path>/main/<table>/model_id=…/corpus=…/."""

    catalog: str
    data_path: str

    @property
    def catalog_kind(self) -> str:
        """`postgres`, `sqlite` or `duckdb`: the database that holds the catalog, from its URL or file suffix."""
        scheme = urlsplit(self.catalog).scheme.lower()
        if scheme in ("postgres", "postgresql") or _LIBPQ_KEY_VALUE.match(self.catalog):
            return "postgres"
        if Path(self.catalog).suffix.lower() in (".sqlite", ".sqlite3", ".db"):
            return "sqlite"
        return "duckdb"

    @property
    def on_s3(self) -> bool:
        """Whether the data path is an s3:// URL."""
        return self.data_path.lower().startswith("s3://")

    def metadata_path(self) -> str:
        """DuckLake's METADATA_PATH: `postgres:<url>`, `sqlite:<file>` or the DuckDB file."""
        if self.catalog_kind == "duckdb":
            return str(Path(self.catalog).expanduser().resolve())
        if self.catalog_kind == "sqlite":
            return f"sqlite:{Path(self.catalog).expanduser().resolve()}"
        return f"postgres:{self.catalog}"

    def normalized_data_path(self) -> str:
        """The data path as DuckLake's DATA_PATH takes it: a local folder made absolute, and either kind
        ending in `/`."""
        path = self.data_path if self.on_s3 else str(Path(self.data_path).expanduser().resolve())
        return path if path.endswith("/") else path + "/"

    def own_files(self) -> tuple[list[str], list[str]]:
        """The files (a DuckDB or SQLite catalog) and folders (the data path) that are the lake's:
        all a reader of it may open."""
        catalog = [] if self.catalog_kind == "postgres" else [str(Path(self.catalog).expanduser().resolve())]
        return catalog, [self.normalized_data_path()]

    def extensions(self) -> list[str]:
        """The DuckDB extensions the lake needs: ducklake, its catalog's scanner and, for data on S3, httpfs."""
        needed = ["ducklake"]
        needed += {"postgres": ["postgres_scanner"], "sqlite": ["sqlite_scanner"], "duckdb": []}[self.catalog_kind]
        return needed + (["httpfs"] if self.on_s3 else [])

    def describe(self) -> str:
        """The catalog (its password masked) and the data path, for messages."""
        return f"catalog {mask_password(self.catalog)}, data {self.data_path}"

    def __repr__(self) -> str:
        # the catalog URL may hold a password, and reprs end up in logs and tracebacks
        return f"LakeConfig(catalog={mask_password(self.catalog)!r}, data_path={self.data_path!r})"

    def catalog_missing(self) -> bool:
        """Whether a catalog file is known to be absent (a PostgreSQL catalog is only known by connecting)."""
        return self.catalog_kind != "postgres" and not Path(self.catalog).expanduser().exists()

    def missing_message(self) -> str:
        """What a reader says when there is no lake at the catalog yet, and how to create one."""
        return (
            f"no DuckLake at {mask_password(self.catalog)} yet: `attn-warehouse run --corpus demo` creates it "
            "(or point ATTN_LAKE_CATALOG at an existing lake)"
        )


def extension_file(name: str) -> Path:
    """The extension's file inside its pip package, for this DuckDB version. Raises
    LakeConfigError naming the package to install when it is missing."""
    package = EXTENSION_PACKAGES[name]
    install = f"pip install '{package}=={duckdb.__version__}'"
    spec = importlib.util.find_spec(package.replace("-", "_"))
    if spec is None or not spec.submodule_search_locations:
        raise LakeConfigError(
            f"the DuckLake backend needs the DuckDB extension `{name}`, from the pip package {package}, "
            f"which is not installed: {install} (extensions are loaded from their packages, never downloaded)"
        )
    folder = Path(next(iter(spec.submodule_search_locations))) / "extensions" / f"v{duckdb.__version__}"
    file = folder / f"{name}.duckdb_extension"
    if not file.exists():
        found = sorted(p.name for p in folder.parent.glob("v*"))
        raise LakeConfigError(
            f"{package} has no `{name}` extension for DuckDB {duckdb.__version__} (it has {found or 'none'}): {install}"
        )
    return file


def load_extensions(conn: duckdb.DuckDBPyConnection, names: list[str]) -> None:
    """Load the named DuckDB extensions from their pip packages' files (never downloaded)."""
    for name in names:
        conn.load_extension(str(extension_file(name)))


def _create_s3_secret(conn: duckdb.DuckDBPyConnection, s3: S3Settings) -> None:
    options = {"REGION": s3.region, "USE_SSL": s3.use_ssl}
    if s3.key_id:
        options |= {"KEY_ID": s3.key_id, "SECRET": s3.secret or ""}
    if s3.session_token:
        options["SESSION_TOKEN"] = s3.session_token
    if s3.endpoint:
        options |= {"ENDPOINT": s3.endpoint, "URL_STYLE": "path"}
    names = ", ".join(f"{key} ?" for key in options)  # option names are fixed here; values are parameters
    conn.execute(f"CREATE OR REPLACE SECRET attn_s3 (TYPE s3, {names})", list(options.values()))


def _check_data_path(conn: duckdb.DuckDBPyConnection, config: LakeConfig) -> None:
    """Fail before writing when the data path cannot take files: a local folder that cannot be
    created or written, an S3 bucket that is missing or refuses the credentials."""
    path = config.normalized_data_path()
    if not config.on_s3:
        try:
            Path(path).mkdir(parents=True, exist_ok=True)
            probe = Path(path) / f".write-probe-{uuid.uuid4().hex}"
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as error:
            raise LakeConfigError(
                f"the DuckLake data path {path} is not writable ({error.strerror or error}): "
                "point ATTN_LAKE_DATA_PATH at a folder this user can write, or fix its permissions"
            ) from None
        return
    try:
        # Lists one prefix that does not exist: a request that needs the bucket and valid credentials.
        conn.execute("SELECT count(*) FROM glob(?)", [f"{path}.attn-access-check-{uuid.uuid4().hex}*"]).fetchone()
    except duckdb.Error as error:
        cause = " ".join(str(error).split())
        raise LakeConfigError(
            f"the DuckLake data path {path} cannot be used: {cause}. Check AWS_ACCESS_KEY_ID / "
            "AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN), AWS_REGION, AWS_ENDPOINT_URL_S3 for an "
            "S3-compatible store, and that the bucket exists"
        ) from None


# Per process: the DuckDB that has a lake attached, by (pid, config, read_only, S3 settings).
_ATTACHED: dict[tuple, duckdb.DuckDBPyConnection] = {}


def connect_lake(
    config: LakeConfig, read_only: bool = False, check_data_path: bool = True
) -> duckdb.DuckDBPyConnection:
    """A connection with the lake attached as `lake` and in use (`USE lake`), so table and view
    names resolve in the lake. A writer's first connection checks the data path.

    A PostgreSQL or SQLite catalog is attached once per process, and each call gets a cursor of
    that DuckDB (a connection with its own transactions): loading the extensions and attaching
    cost about half a second, which every asset's connections would pay again. A DuckDB-file
    catalog is opened per call, since the open file is locked against every other process."""
    if config.catalog_kind == "duckdb":
        return _attach(config, read_only, check_data_path)
    key = (os.getpid(), config, read_only, S3Settings.from_env() if config.on_s3 else None)
    if key not in _ATTACHED:
        _ATTACHED[key] = _attach(config, read_only, check_data_path)
    cursor = _ATTACHED[key].cursor()
    cursor.execute(f"USE {LAKE_NAME}")
    if config.catalog_kind == "sqlite" and not read_only:
        _WRITE_LOCKS[cursor] = _write_lock_for(config)
    return cursor


def _attach(config: LakeConfig, read_only: bool, check_data_path: bool) -> duckdb.DuckDBPyConnection:
    """A new in-memory DuckDB with the lake attached and in use. A reader that finds no lake
    raises LakeMissingError; a writer creates the lake when the catalog is new."""
    if read_only and config.catalog_missing():
        raise LakeMissingError(config.missing_message())
    if config.catalog_kind != "postgres" and not read_only:
        folder = Path(config.catalog).expanduser().resolve().parent
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise LakeConfigError(
                f"cannot create the folder {folder} of the DuckLake catalog {config.catalog}: {error.strerror or error}"
            ) from None
    conn = duckdb.connect(":memory:", config=dict(NO_DOWNLOADS))
    try:
        load_extensions(conn, config.extensions())
        if config.on_s3:
            _create_s3_secret(conn, S3Settings.from_env())
        if check_data_path and not read_only:
            _check_data_path(conn, config)  # before ATTACH, which would initialize a new catalog
        secret = {"METADATA_PATH": config.metadata_path(), "DATA_PATH": config.normalized_data_path()}
        conn.execute(
            f"CREATE OR REPLACE SECRET {_SECRET_NAME} (TYPE ducklake, METADATA_PATH ?, DATA_PATH ?)",
            list(secret.values()),
        )
        # Inlining off: every batch is a Parquet file under model_id=…/corpus=…, and writers
        # never touch a shared inlined-data table.
        mode = "READ_ONLY" if read_only else "DATA_INLINING_ROW_LIMIT 0"
        try:
            conn.execute(f"ATTACH 'ducklake:{_SECRET_NAME}' AS {LAKE_NAME} ({mode})")
        except duckdb.Error as error:
            if read_only and _NO_LAKE_IN_CATALOG.search(str(error)):
                raise LakeMissingError(config.missing_message()) from None
            cause = mask_password(" ".join(str(error).split()))
            raise LakeConfigError(
                f"cannot open the DuckLake catalog {mask_password(config.catalog)}: {cause}. Check "
                "ATTN_LAKE_CATALOG (server up? database created? user and password?) and ATTN_LAKE_DATA_PATH"
            ) from None
        conn.execute(f"USE {LAKE_NAME}")
        if read_only:  # a reader keeps no way to attach the lake again, writable, nor to open other files
            conn.execute(f"DROP SECRET {_SECRET_NAME}")
            confine_reader(conn, *config.own_files())
    except BaseException:
        conn.close()
        raise
    return conn


def is_lake(conn: duckdb.DuckDBPyConnection) -> bool:
    """Whether the connection's current database is a DuckLake."""
    row = conn.execute("SELECT type FROM duckdb_databases() WHERE database_name = current_database()").fetchone()
    return bool(row) and row[0] == "ducklake"


# Beside a SQLite catalog: the file lock its writers take turns on (holding_write_lock).
WRITE_LOCK_SUFFIX = ".write-lock"
# The write lock of each connection connect_lake made on a SQLite catalog, known without a
# statement: every statement on the lake reads the catalog, which fails while another commits.
_WRITE_LOCKS: "weakref.WeakKeyDictionary[duckdb.DuckDBPyConnection, FileLock]" = weakref.WeakKeyDictionary()


def _write_lock_for(config: LakeConfig) -> FileLock:
    """The catalog's write lock: one instance per file in this process (reentrant in a thread, so
    a locked write may call another), one file descriptor per thread (so threads take turns too)."""
    path = f"{Path(config.catalog).expanduser().resolve()}{WRITE_LOCK_SUFFIX}"
    return FileLock(path, timeout=DEFAULT_LOCK_TIMEOUT_SECONDS, is_singleton=True)


def holding_write_lock(
    write: Callable[Concatenate[duckdb.DuckDBPyConnection, P], R],
) -> Callable[Concatenate[duckdb.DuckDBPyConnection, P], R]:
    """A write of the storage modules (its first argument the connection), run holding the lake's
    write lock: a SQLite catalog takes one committing transaction at a time and fails the others,
    and any reads beside them, with `database is locked`, so the writers of a machine (processes
    and threads) take turns on a file lock beside it, which the OS releases when a holder dies. A
    PostgreSQL catalog takes concurrent writers itself, a DuckDB-file catalog has one process, and
    the DuckDB file its own lock: no lock. Raises WarehouseLockedError when another writer held the
    lock for DEFAULT_LOCK_TIMEOUT_SECONDS."""

    @functools.wraps(write)
    def locked(conn: duckdb.DuckDBPyConnection, *args: P.args, **kwargs: P.kwargs) -> R:
        lock = _WRITE_LOCKS.get(conn)
        if lock is None:
            return write(conn, *args, **kwargs)
        try:
            lock.acquire()
        except Timeout:
            raise WarehouseLockedError(
                f"another writer of the DuckLake held its catalog's write lock {lock.lock_file} for "
                f"{DEFAULT_LOCK_TIMEOUT_SECONDS:g} s: a write or maintenance pass is stuck; end it (or wait) and re-run"
            ) from None
        try:
            return write(conn, *args, **kwargs)
        finally:
            lock.release()

    return locked


def retry_on_conflict(
    transaction: Callable[[], None], attempts: int = 8, log: Callable[[str], None] | None = None
) -> int:
    """Run `transaction` (which rolls itself back on failure) again while it fails on a
    concurrent transaction (RETRYABLE); returns how many retries it took. The waits double and
    are jittered, so writers that collided once do not collide again in step."""
    for attempt in range(attempts):
        try:
            transaction()
            return attempt
        except duckdb.Error as error:
            if attempt == attempts - 1 or not RETRYABLE.search(str(error)):
                raise
            if log:
                log(f"DuckLake transaction conflict, retrying ({attempt + 1}/{attempts - 1}): {error}")
            time.sleep(0.05 * 2**attempt * random.uniform(0.5, 1.5))
    raise AssertionError("unreachable")


# Files younger than this are never deleted as orphans, whatever `keep` says: a writer writes its
# Parquet files before it commits them, and a file deleted in between leaves a committed batch
# without its rows. Longer than any one write (a conflict's retries included).
ORPHAN_FLOOR = timedelta(hours=1)


@holding_write_lock
def maintain_files(
    conn: duckdb.DuckDBPyConnection, keep: timedelta, orphan_floor: timedelta = ORPHAN_FLOOR
) -> dict[str, int]:
    """DuckLake's file maintenance: delete orphans older than `keep` (files of writers killed
    or failed before committing: first, so a data path that a failed write filled has room for
    the rest), merge small adjacent Parquet files, rewrite files that deletes left mostly empty,
    expire snapshots older than `keep` (time travel before that is gone; the merges and rewrites
    are snapshots too, so their replaced files expire in this same pass when `keep` is 0), then
    delete the files expired snapshots no longer reference. Returns what each step reported
    (deleted orphans, merged files, rewritten files, expired snapshots, deleted files). Orphans
    younger than `orphan_floor` are kept, however small `keep` is: they may be a writer's
    uncommitted files (the asset's config cannot lower it; tests of orphans long dead do)."""
    steps = {
        "deleted_orphaned_files": ("ducklake_delete_orphaned_files", True),
        "merged_files": ("ducklake_merge_adjacent_files", False),
        "rewritten_files": ("ducklake_rewrite_data_files", False),
        "expired_snapshots": ("ducklake_expire_snapshots", True),
        "deleted_old_files": ("ducklake_cleanup_old_files", True),
    }
    done = {}
    for name, (function, takes_cutoff) in steps.items():
        # the cutoff in the catalog's own clock (now()), so it is later than what was just scheduled
        cutoff = ", older_than => now() - to_seconds(?::DOUBLE)" if takes_cutoff else ""
        query = f"SELECT count(*) FROM {function}('{LAKE_NAME}'{cutoff})"
        # fetchall: a result left streaming (fetchone) keeps the function's transaction from committing
        age = max(keep, orphan_floor) if name == "deleted_orphaned_files" else keep
        done[name] = conn.execute(query, [age.total_seconds()] if takes_cutoff else []).fetchall()[0][0]
    return done


def read_retrying(
    conn: duckdb.DuckDBPyConnection,
    query: str,
    parameters: list | None = None,
    attempts: int = 8,
    fetch: Callable[[duckdb.DuckDBPyConnection], T] = duckdb.DuckDBPyConnection.fetchall,
) -> T:
    """A read's result (`fetch` of the executed query: its rows by default), run again while it
    fails on a concurrent writer (RETRYABLE): on a SQLite catalog, a read that meets a committing
    writer fails with `database is locked` and leaves its connection's transaction aborted, which a
    ROLLBACK clears. A failure while `fetch` streams the result through Arrow is an OSError."""
    for attempt in range(attempts):
        try:
            return fetch(conn.execute(query, parameters or []))
        except (duckdb.Error, OSError) as error:
            if attempt == attempts - 1 or not RETRYABLE.search(str(error)):
                raise
            try:
                conn.execute("ROLLBACK")
            except duckdb.Error:
                pass  # nothing was open: the failed statement ended its own transaction
            time.sleep(0.05 * 2**attempt * random.uniform(0.5, 1.5))
    raise AssertionError("unreachable")
