"""The asset tests' warehouse (`conn`, a copy of tests/warehouse_templates.py's template), Dagster
resources (`resources`, on a temporary warehouse file) and a models cache of their own."""

from pathlib import Path

import pytest

from tests.runs import run_resources
from tests.warehouse_templates import conn, duckdb_template  # noqa: F401  (fixtures)


@pytest.fixture(autouse=True)
def models_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A models cache of the test's own: fine-tuned checkpoints and the states long steps resume from
    (training_state/, hta_state/) stay out of the working directory's."""
    folder = tmp_path / "models_cache"
    monkeypatch.setenv("ATTN_MODELS_CACHE", str(folder))
    return folder


@pytest.fixture
def resources(tmp_path: Path) -> dict:
    """Dagster resources on a temporary warehouse file, an empty data directory and chart folder;
    passes compute where ATTN_DEVICE / ATTN_DTYPE say (default: auto)."""
    return run_resources(tmp_path)
