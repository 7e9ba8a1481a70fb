"""The asset tests' warehouse (`conn`, in memory), Dagster resources (`resources`, on a temporary
warehouse file) and a models cache of their own."""

from pathlib import Path

import duckdb
import pytest

from dagster_project.storage.views import apply_views
from tests.runs import run_resources


@pytest.fixture(autouse=True)
def models_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A models cache of the test's own: fine-tuned checkpoints and the states long steps resume from
    (training_state/, hta_state/) stay out of the working directory's."""
    folder = tmp_path / "models_cache"
    monkeypatch.setenv("ATTN_MODELS_CACHE", str(folder))
    return folder


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
