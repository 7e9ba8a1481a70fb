"""Dagster resources: the warehouse file and the folders the assets read from and write to."""

from pathlib import Path

from dagster import ConfigurableResource
from dagster_duckdb import DuckDBResource

from dagster_project import settings


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


def default_resources() -> dict[str, ConfigurableResource]:
    """Resources from the environment (ATTN_WAREHOUSE, ATTN_DATA_DIR, ATTN_CHARTS_DIR)."""
    return {
        "warehouse": DuckDBResource(database=str(settings.warehouse_path())),
        "data_dir": DataDirectory(path=str(settings.data_dir())),
        "chart_folder": ChartFolder(path=str(settings.charts_dir())),
    }
