"""The unit tests' warehouse: `conn`, a DuckDB file with every table and view (a copy of a
template built once per test process, tests/warehouse_templates.py)."""

from pathlib import Path

import duckdb
import pytest

from dagster_project.storage.views import apply_views
from tests.warehouse_templates import Template, build_templates, connect, copy_template


@pytest.fixture(scope="session")
def template(tmp_path_factory: pytest.TempPathFactory) -> Template:
    return build_templates(tmp_path_factory.mktemp("unit-template"), apply_views, ["duckdb"])["duckdb"]


@pytest.fixture
def conn(tmp_path: Path, template: Template) -> duckdb.DuckDBPyConnection:
    """A warehouse with every table and view."""
    connection = connect(copy_template(template, tmp_path))
    yield connection
    connection.close()
