"""The asset tests' warehouse (`conn`, in memory) and Dagster resources (`resources`, on a
temporary warehouse file)."""

from pathlib import Path

import duckdb
import pytest

from dagster_project.storage.views import apply_views
from tests.runs import run_resources


@pytest.fixture
def conn() -> duckdb.DuckDBPyConnection:
    """An in-memory warehouse with every table and view."""
    connection = duckdb.connect(":memory:")
    apply_views(connection)
    yield connection
    connection.close()


@pytest.fixture
def resources(tmp_path: Path) -> dict:
    """Dagster resources on a temporary warehouse file, an empty data directory and chart folder;
    passes compute where ATTN_DEVICE / ATTN_DTYPE say (default: auto)."""
    return run_resources(tmp_path)
