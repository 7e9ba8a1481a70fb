"""Dagster resources: the warehouse (a DuckDB file or a DuckLake) and the folders the assets read from and write to."""

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb
from dagster import ConfigurableResource, EnvVar, get_dagster_logger
from dagster_duckdb import DuckDBResource
from pydantic import Field

from dagster_project import settings
from dagster_project.compute import devices
from dagster_project.compute.devices import DEVICE_SETTING, DTYPE_SETTING, ComputeDevice
from dagster_project.storage.backend import BACKENDS, CATALOG_SETTING, DATA_PATH_SETTING, WarehouseConfig
from dagster_project.storage.connections import DEFAULT_LOCK_TIMEOUT_SECONDS, connect_for_writing
from dagster_project.storage.lake import LakeConfig, LakeConfigError, connect_lake

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


def _resolved(value: str) -> str:
    """A field's value. Inside a run Dagster has replaced an EnvVar field by the variable's value;
    outside one (the CLI registering a model, the sensor) the field still holds the EnvVar, read here."""
    return (value.get_value() or "") if isinstance(value, EnvVar) else value


class WarehouseResource(DuckDBResource):
    """The warehouse, on the backend of `backend` (storage/backend.py).

    `duckdb`: the file `database`. A writer that finds the file held by another process
    (DuckDB's one-writer lock) waits, saying so in the log, up to `lock_timeout_seconds`, then
    fails with one line on what to do instead of DuckDB's lock error.
    `ducklake`: the lake of `lake_catalog` and `lake_data_path`, attached as `lake` in an
    in-memory DuckDB; many processes write at once, and a connection fails before writing
    anything when the catalog or the data path cannot be used."""

    lock_timeout_seconds: float | None = Field(
        default=None,
        description=f"Seconds to wait for another process's lock on the file; unset: {LOCK_TIMEOUT_ENV} "
        f"or {DEFAULT_LOCK_TIMEOUT_SECONDS:g}.",
    )
    backend: str = Field(default="duckdb", description=f"One of {BACKENDS}.")
    lake_catalog: str = Field(
        default="", description="ducklake: postgresql://user:password@host:port/db, a .sqlite or a .ducklake file."
    )
    lake_data_path: str = Field(default="", description="ducklake: a folder or s3://bucket/prefix/.")

    def lock_timeout(self) -> float:
        return lock_timeout_from_env() if self.lock_timeout_seconds is None else self.lock_timeout_seconds

    def lake(self) -> LakeConfig | None:
        if self.backend not in BACKENDS:
            raise LakeConfigError(f"warehouse backend {self.backend!r} is not one of {BACKENDS}")
        if self.backend == "duckdb":
            return None
        catalog, data_path = _resolved(self.lake_catalog), _resolved(self.lake_data_path)
        if not (catalog and data_path):
            raise LakeConfigError(
                f"the ducklake backend needs lake_catalog and lake_data_path ({CATALOG_SETTING}, {DATA_PATH_SETTING})"
            )
        return LakeConfig(catalog, data_path)

    @contextmanager
    def get_connection(self) -> Iterator[duckdb.DuckDBPyConnection]:
        lake = self.lake()
        if lake is not None:
            conn = connect_lake(lake)
        else:
            config = {"custom_user_agent": "dagster", **self.connection_config}
            conn = connect_for_writing(self.database, config, self.lock_timeout(), log=_log_wait)
        try:
            yield conn
        finally:
            conn.close()


def connect_warehouse(warehouse: DuckDBResource, lock_timeout_seconds: float) -> duckdb.DuckDBPyConnection:
    """A writing connection outside a run (the registry sensor), waiting at most
    `lock_timeout_seconds` for a DuckDB file's lock; a lake has no lock to wait for."""
    lake = warehouse.lake() if isinstance(warehouse, WarehouseResource) else None
    if lake is not None:
        return connect_lake(lake)
    return connect_for_writing(warehouse.database, timeout_seconds=lock_timeout_seconds)


def warehouse_resource(config: WarehouseConfig) -> WarehouseResource:
    """The resource of a configuration; a lake's catalog and data path stay environment variables
    (the catalog URL holds a password, which the UI then never shows)."""
    if config.lake is None:
        return WarehouseResource(database=config.database)
    return WarehouseResource(
        database=config.database,
        backend=config.backend,
        lake_catalog=EnvVar(CATALOG_SETTING),
        lake_data_path=EnvVar(DATA_PATH_SETTING),
    )


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
    """Resources from the environment (ATTN_WAREHOUSE_BACKEND, ATTN_WAREHOUSE or ATTN_LAKE_CATALOG and
    ATTN_LAKE_DATA_PATH, ATTN_DATA_DIR, ATTN_CHARTS_DIR, ATTN_LOCK_TIMEOUT_SECONDS,
    ATTN_DEVICE, ATTN_DTYPE)."""
    return {
        "warehouse": warehouse_resource(WarehouseConfig.from_env()),
        "data_dir": DataDirectory(path=str(settings.data_dir())),
        "chart_folder": ChartFolder(path=str(settings.charts_dir())),
        "compute": ComputeResource(),
    }
