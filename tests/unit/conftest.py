"""The unit tests' warehouse: `conn`, an in-memory DuckDB with every table and view."""

import duckdb
import pytest

from dagster_project.storage.views import apply_views


@pytest.fixture
def conn() -> duckdb.DuckDBPyConnection:
    """An in-memory warehouse with every table and view."""
    connection = duckdb.connect(":memory:")
    apply_views(connection)
    yield connection
    connection.close()
