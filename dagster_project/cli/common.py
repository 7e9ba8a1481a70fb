"""What every verb shares: the project's Dagster instance, one-line errors, the configured warehouse."""

import os
import shutil
import sys
from typing import TYPE_CHECKING

from dagster_project import settings

if TYPE_CHECKING:
    from dagster_project.storage.backend import WarehouseConfig


def use_project_instance() -> None:
    """Point DAGSTER_HOME at the project's instance folder, which a new one gets the project's
    instance settings in (one writer at a time in the warehouse_writer pool, run monitoring).
    UsageError where that folder cannot be made (beside a warehouse in a read-only folder)."""
    home = settings.dagster_home()
    try:
        home.mkdir(parents=True, exist_ok=True)
        if not (home / "dagster.yaml").exists():
            shutil.copyfile(settings.INSTANCE_SETTINGS, home / "dagster.yaml")
    except OSError as error:
        raise UsageError(
            f"cannot set up the Dagster instance folder {home} ({error.strerror or error}): set DAGSTER_HOME to a "
            "folder this user can write (it defaults to .dagster beside ATTN_WAREHOUSE)"
        ) from None
    os.environ["DAGSTER_HOME"] = str(home)


class UsageError(ValueError):
    """A command line that cannot run as given; printed as one line, exit status 2."""


class RunInterrupted(Exception):
    """A run stopped by Ctrl-C or SIGTERM, which has said so in one line; exit status 130."""


def user_error(error: BaseException) -> tuple[str | None, BaseException]:
    """The step and the exception an asset raised behind `error` (Dagster wraps it), else (None, error)."""
    seen: set[int] = set()
    current: BaseException | None = error
    step = None
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        step = getattr(current, "step_key", None) or step
        inner = getattr(current, "user_exception", None)
        if inner is None:
            return step, current
        current = inner
    return step, error


def one_line(error: BaseException) -> str:
    """The error's message on one line, any password of a URL in it (the lake's catalog) masked."""
    from dagster_project.storage.lake import mask_password

    errors = getattr(error, "errors", None)  # DagsterInvalidConfigError: one entry per problem
    text = "; ".join(str(getattr(item, "message", item)) for item in errors) if errors else str(error)
    return mask_password(" ".join(text.split())) or type(error).__name__


def existing_warehouse() -> "WarehouseConfig | None":
    """The configured warehouse (storage/backend.py), or None after saying there is none yet."""
    from dagster_project.storage.backend import WarehouseConfig
    from dagster_project.storage.lake import LakeConfigError

    try:
        warehouse = WarehouseConfig.from_env()
    except LakeConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return None
    if warehouse.exists():
        return warehouse
    print(f"error: {warehouse.missing_message()}", file=sys.stderr)
    return None


def reader_error(error: Exception, warehouse: "WarehouseConfig") -> int:
    """Say in one line why a read-only visit to the warehouse failed; exit status 2."""
    import duckdb

    from dagster_project.storage.backend import READ_LOCK_WAIT_SECONDS

    if isinstance(error, duckdb.PermissionException):  # the reader opens no file but the warehouse's
        refused = one_line(RuntimeError(str(error).split("\nLINE ")[0]))  # without the query's text after it
        print(
            f"error: {refused}: a read-only query reads the warehouse's own tables and views, "
            "no other file, URL or extension; read other files with DuckDB itself",
            file=sys.stderr,
        )
    elif "could not set lock" in str(error).lower():
        print(
            f"error: the warehouse {warehouse.database} is being written by another process (a run?) and stayed "
            f"locked for {READ_LOCK_WAIT_SECONDS:.0f} s: try again when it ends",
            file=sys.stderr,
        )
    else:
        print(f"error: {one_line(error)}", file=sys.stderr)
    return 2
