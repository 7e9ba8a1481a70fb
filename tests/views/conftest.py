"""The view tests run on both warehouse backends: `conn` is a DuckDB file, or a DuckLake
(DuckDB-file catalog, local Parquet folder) attached as `lake` and in use, with every table
and view of sql/ created by the same apply_views, each a copy of a template built once per
test process (tests/warehouse_templates.py)."""

from pathlib import Path

import duckdb
import pytest

from dagster_project.storage.views import apply_views
from tests.warehouse_templates import BACKENDS, Template, build_templates, connect, copy_template


@pytest.fixture(scope="session")
def templates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Template]:
    return build_templates(tmp_path_factory.mktemp("view-templates"), apply_views)


@pytest.fixture(params=BACKENDS)
def conn(request: pytest.FixtureRequest, tmp_path: Path, templates: dict[str, Template]) -> duckdb.DuckDBPyConnection:
    connection = connect(copy_template(templates[request.param], tmp_path))
    yield connection
    connection.close()
