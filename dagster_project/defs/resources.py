"""Dagster resources: the warehouse file and the folders the assets read from and write to."""

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb
from dagster import ConfigurableResource, get_dagster_logger
from dagster_duckdb import DuckDBResource
from pydantic import Field

from dagster_project import settings
from dagster_project.compute import devices
from dagster_project.compute.devices import DEVICE_SETTING, DTYPE_SETTING, ComputeDevice
from dagster_project.storage.warehouse import DEFAULT_LOCK_TIMEOUT_SECONDS, connect_for_writing

LOCK_TIMEOUT_ENV = "ATTN_LOCK_TIMEOUT_SECONDS"


def lock_timeout_from_env() -> float:
    """Seconds a writer waits for the warehouse lock (ATTN_LOCK_TIMEOUT_SECONDS, default 300)."""
    value = os.environ.get(LOCK_TIMEOUT_ENV, "").strip()
    if not value:
        return DEFAULT_LOCK_TIMEOUT_SECONDS
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not seconds >= 0:
        raise ValueError(f"{LOCK_TIMEOUT_ENV}={value!r} is not a number of seconds (>= 0)")
    return seconds


def _log_wait(message: str) -> None:
    """INFO to the run's log inside a run; on stderr outside one when nothing else would show it."""
    log = get_dagster_logger("warehouse")
    log.info(message)
    if not log.hasHandlers():
        print(message, file=sys.stderr)


class WarehouseResource(DuckDBResource):
    """The DuckDB warehouse. A writer that finds the file held by another process (DuckDB's
    one-writer lock) waits, saying so in the log, up to `lock_timeout_seconds`, then fails
    with one line on what to do instead of DuckDB's lock error."""

    lock_timeout_seconds: float | None = Field(
        default=None,
        description=f"Seconds to wait for another process's lock on the file; unset: {LOCK_TIMEOUT_ENV} "
        f"or {DEFAULT_LOCK_TIMEOUT_SECONDS:g}.",
    )

    def lock_timeout(self) -> float:
        return lock_timeout_from_env() if self.lock_timeout_seconds is None else self.lock_timeout_seconds

    @contextmanager
    def get_connection(self) -> Iterator[duckdb.DuckDBPyConnection]:
        config = {"custom_user_agent": "dagster", **self.connection_config}
        conn = connect_for_writing(self.database, config, self.lock_timeout(), log=_log_wait)
        try:
            yield conn
        finally:
            conn.close()


class DataDirectory(ConfigurableResource):
    """Root of the corpora, laid out like ../shared/data (override per run in the launchpad)."""

    path: str

    @property
    def root(self) -> Path:
        return Path(self.path).expanduser().resolve()


class ChartFolder(ConfigurableResource):
    """Where chart HTML and PNG files go."""

    path: str

    def for_model(self, model_id: str) -> Path:
        return Path(self.path).expanduser().resolve() / model_id


class ComputeResource(ConfigurableResource):
    """Where the passes compute: device and forward dtype (compute.devices). Empty fields read
    ATTN_DEVICE / ATTN_DTYPE when a run starts; set them in a run's resource config to override."""

    device: str = Field(default="", description=f"auto | cpu | cuda | cuda:N | mps; empty: {DEVICE_SETTING} or auto.")
    dtype: str = Field(
        default="",
        description=f"Forward dtype of forward-only passes: float32 | bfloat16 | float16; empty: {DTYPE_SETTING} "
        "or float32. Passes that take gradients run in float32 whatever it says.",
    )

    def resolve(self) -> ComputeDevice:
        """The resolved device and dtype; a clear error naming the setting when unusable here."""
        return devices.resolve(
            self.device or settings.compute_device(),
            self.dtype or settings.compute_dtype(),
            "resource compute.device" if self.device else DEVICE_SETTING,
            "resource compute.dtype" if self.dtype else DTYPE_SETTING,
        )


def default_resources() -> dict[str, ConfigurableResource]:
    """Resources from the environment (ATTN_WAREHOUSE, ATTN_DATA_DIR, ATTN_CHARTS_DIR, ATTN_LOCK_TIMEOUT_SECONDS,
    ATTN_DEVICE, ATTN_DTYPE)."""
    return {
        "warehouse": WarehouseResource(database=str(settings.warehouse_path())),
        "data_dir": DataDirectory(path=str(settings.data_dir())),
        "chart_folder": ChartFolder(path=str(settings.charts_dir())),
        "compute": ComputeResource(),
    }
