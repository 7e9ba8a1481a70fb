"""The view tests run on both warehouse backends: `conn` is an in-memory DuckDB, or a DuckLake
(DuckDB-file catalog, local Parquet folder) attached as `lake` and in use, with every table
and view of sql/ created by the same apply_views."""

from pathlib import Path

import duckdb
import pytest

from dagster_project.storage.lake import LakeConfig, connect_lake
from dagster_project.storage.views import apply_views


@pytest.fixture(params=["duckdb", "ducklake"])
def conn(request: pytest.FixtureRequest, tmp_path: Path) -> duckdb.DuckDBPyConnection:
    if request.param == "duckdb":
        connection = duckdb.connect(":memory:")
    else:
        connection = connect_lake(LakeConfig(str(tmp_path / "catalog.ducklake"), str(tmp_path / "lake-data")))
    apply_views(connection)
    yield connection
    connection.close()
