"""Warehouses built once and copied per test: creating every table and view takes 0.3 s on a DuckDB
and 0.6 s on a DuckLake, and hundreds of tests need a fresh warehouse. A DuckDB warehouse is one
file; a lake's catalog is one DuckDB file too, and its copies share the template's data folder,
where each writes Parquet files of its own names."""

import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

import duckdb

from dagster_project.storage.lake import LakeConfig, connect_lake

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
