"""Connections to the warehouse file, its lock and the errors every write module raises: one
writing process per DuckDB file (connect_for_writing waits for it), a file that cannot be
written, a lake not set up, and the ROLLBACK after a failed write; and a reader's confinement to
the warehouse's own files (confine_reader)."""

import logging
import re
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb

_log = logging.getLogger(__name__)

DEFAULT_LOCK_TIMEOUT_SECONDS = 300.0
LOCK_WAIT_MESSAGE = "waiting for the warehouse lock held by another process"
_LOCK_HOLDER = re.compile(r"Conflicting lock is held in (?P<program>.*?) \(PID (?P<pid>\d+)\)")


class WarehouseLockedError(RuntimeError):
    """Another process held the warehouse file for longer than the lock timeout."""


class WarehouseFullError(RuntimeError):
    """A write to the warehouse failed for lack of disk space (or another IO error); nothing was committed."""


def _lock_holder(error: Exception) -> str:
    """' (PID 123, /usr/bin/duckdb)' from DuckDB's lock error, '' when it names no process."""
    found = _LOCK_HOLDER.search(str(error))
    return f" (PID {found['pid']}, {found['program']})" if found else ""


class WarehouseFileError(RuntimeError):
    """The warehouse file cannot be opened for writing: not a DuckDB file, or its folder refuses it."""


def open_for_writing(database: str, config: dict[str, Any]) -> duckdb.DuckDBPyConnection:
    """duckdb.connect(database) read-write; WarehouseFileError, one line saying what to do, where
    the file is not a DuckDB database or cannot be created or opened, or its folder cannot take the
    write-ahead log DuckDB keeps beside it (a read-only folder: the first COMMIT would fail)."""
    folder = Path(database).expanduser().resolve().parent
    if database and not database.startswith(":memory:") and folder.is_dir():
        probe = folder / f".{Path(database).name}.write-probe-{uuid.uuid4().hex}"
        try:
            probe.touch(exist_ok=False)
            probe.unlink()
        except OSError as error:
            raise WarehouseFileError(
                f"cannot write in the folder {folder} of the warehouse {database} ({error.strerror or error}), where "
                "DuckDB keeps its write-ahead log: make the folder writable, or point ATTN_WAREHOUSE at a folder "
                "this user can write"
            ) from None
    try:
        return duckdb.connect(database, read_only=False, config=config)
    except duckdb.IOException as error:
        cause = " ".join(str(error).split())
        if "could not set lock" in cause.lower():
            raise
        if "not a valid DuckDB database file" in cause:
            raise WarehouseFileError(
                f"the warehouse {database} is not a DuckDB database file: point ATTN_WAREHOUSE at the warehouse "
                "(or at a new file name, for a new one), or move that file away"
            ) from None
        raise WarehouseFileError(
            f"cannot open the warehouse {database} for writing ({cause.removeprefix('IO Error: ')}): "
            "make its folder writable, or point ATTN_WAREHOUSE at a folder this user can write"
        ) from None


def connect_for_writing(
    database: str,
    config: dict[str, Any] | None = None,
    timeout_seconds: float = DEFAULT_LOCK_TIMEOUT_SECONDS,
    log: Callable[[str], None] = _log.info,
) -> duckdb.DuckDBPyConnection:
    """A read-write connection to `database`, waiting up to `timeout_seconds` while another
    process holds the file (DuckDB allows one writing process, and no writer beside readers
    of other processes). `log` gets a message when the wait starts and every 30 s of it.
    Raises WarehouseLockedError, with one line saying what to do, when the wait runs out."""
    started = time.monotonic()
    delay, next_note = 0.05, 0.0
    while True:
        try:
            return open_for_writing(database, config or {})
        except duckdb.IOException as error:
            if "could not set lock" not in str(error).lower():
                raise
            waited = time.monotonic() - started
            if waited >= timeout_seconds:
                raise WarehouseLockedError(
                    f"the warehouse {database} is still locked by another process{_lock_holder(error)} "
                    f"after {timeout_seconds:g} s: "
                    "close that connection (a DuckDB CLI, notebook or script holding the file), and use "
                    '`attn-warehouse sql "<query>"` for ad-hoc queries (it opens the file read-only and closes it), '
                    "then re-run; or wait longer with ATTN_LOCK_TIMEOUT_SECONDS"
                ) from None
            if waited >= next_note:
                log(
                    f"{LOCK_WAIT_MESSAGE}{_lock_holder(error)} on {database}: "
                    f"waited {waited:.0f} s of {timeout_seconds:g} s (ATTN_LOCK_TIMEOUT_SECONDS)"
                )
                next_note = waited + 30.0
            time.sleep(min(delay, max(timeout_seconds - waited, 0.0)))
            delay = min(delay * 2, 1.0)


def confine_reader(conn: duckdb.DuckDBPyConnection, paths: list[str], directories: list[str]) -> None:
    """Let `conn`'s DuckDB open no file but its own database's (which DuckDB allows itself), `paths`
    and what lies under `directories`, load no extension, and never change that again: a reader
    runs a user's query, which may name any file (read_csv('/etc/passwd'), glob('/root/*')) or URL.
    A DuckDB confined already is left so: a file opened again in this process shares its DuckDB."""
    (external,) = conn.execute("SELECT current_setting('enable_external_access')").fetchone()
    if not external:
        return
    conn.execute("SET allowed_paths = ?", [paths])
    conn.execute("SET allowed_directories = ?", [directories])
    conn.execute("SET enable_external_access = false")
    conn.execute("SET lock_configuration = true")


class LakeNotSetUpError(RuntimeError):
    """The lake lacks a table or view of sql/: its setup step has not run."""


def lake_not_set_up(error: duckdb.Error) -> LakeNotSetUpError:
    """The error for a lake read or write that met a missing table or view (`error`): it says to
    materialize `warehouse_views` once, then re-run."""
    return LakeNotSetUpError(
        f"the DuckLake warehouse is not set up ({' '.join(str(error).split())}): materialize `warehouse_views` "
        "once (it creates the tables, partitions them by (model_id, corpus) and creates the views), then re-run"
    )


def roll_back(conn: duckdb.DuckDBPyConnection) -> None:
    """ROLLBACK after a failed write; a connection that an IO error left unusable has nothing
    committed to undo, and its error is not the one to report."""
    try:
        conn.execute("ROLLBACK")
    except duckdb.Error as error:
        if "no transaction is active" not in str(error):  # a failed COMMIT has rolled back already
            _log.warning("ROLLBACK after a failed warehouse write failed too: %s", error)
