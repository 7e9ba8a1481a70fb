"""Warehouses built once and copied per test: creating every table and view takes 0.3 s on a DuckDB
and 0.6 s on a DuckLake, and hundreds of tests need a fresh warehouse. A DuckDB warehouse is one
file; a lake's catalog is one DuckDB file too, and its copies share the template's data folder,
where each writes Parquet files of its own names. `conn` and its template are fixtures for the
conftest.py files that import them."""

import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

import duckdb
import pytest

from dagster_project.storage.lake import LakeConfig, connect_lake
from dagster_project.storage.views import apply_views

BACKENDS = ("duckdb", "ducklake")
Template = Path | LakeConfig  # a DuckDB file, or a lake with a DuckDB-file catalog


def build_templates(
    folder: Path, fill: Callable[[duckdb.DuckDBPyConnection], None], backends: Sequence[str] = BACKENDS
) -> dict[str, Template]:
    """Per backend, a closed warehouse under `folder` that `fill` has written."""
    templates: dict[str, Template] = {
        "duckdb": folder / "warehouse.duckdb",
        "ducklake": LakeConfig(str(folder / "catalog.ducklake"), str(folder / "lake-data")),
    }
    for backend in backends:
        connection = connect(templates[backend])
        fill(connection)
        connection.close()
    return {backend: templates[backend] for backend in backends}


def copy_template(template: Template, folder: Path) -> Template:
    """A copy of `template` in `folder`, of the same kind."""
    if isinstance(template, Path):
        return Path(shutil.copy(template, folder / template.name))
    catalog = shutil.copy(template.catalog, folder / Path(template.catalog).name)
    return LakeConfig(str(catalog), template.data_path)


def connect(warehouse: Template) -> duckdb.DuckDBPyConnection:
    return duckdb.connect(str(warehouse)) if isinstance(warehouse, Path) else connect_lake(warehouse)


@pytest.fixture(scope="session")
def duckdb_template(tmp_path_factory: pytest.TempPathFactory) -> Template:
    return build_templates(tmp_path_factory.mktemp("warehouse-template"), apply_views, ["duckdb"])["duckdb"]


@pytest.fixture
def conn(tmp_path: Path, duckdb_template: Template) -> duckdb.DuckDBPyConnection:
    """A DuckDB warehouse with every table and view, a copy of the template."""
    connection = connect(copy_template(duckdb_template, tmp_path))
    yield connection
    connection.close()
