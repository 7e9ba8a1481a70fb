"""Where a user's files go (settings.py): the home folder (ATTN_HOME, else the working
directory), never the install location; a warehouse moved by ATTN_WAREHOUSE keeps its charts and
run history beside it; each location's own variable wins."""

import sys
from pathlib import Path

import pytest

from dagster_project import settings
from dagster_project.defs.model_registry import registry_path

LOCATION_SETTINGS = (
    "ATTN_HOME",
    "ATTN_WAREHOUSE",
    "ATTN_CHARTS_DIR",
    "ATTN_MODELS_CACHE",
    "ATTN_MODELS_REGISTRY",
    "DAGSTER_HOME",
)


@pytest.fixture(autouse=True)
def no_location_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in LOCATION_SETTINGS:
        monkeypatch.delenv(name, raising=False)


def locations() -> dict[str, Path]:
    return {
        "warehouse": settings.warehouse_path(),
        "charts": settings.charts_dir(),
        "models_cache": settings.models_cache_dir(),
        "registry": registry_path(),
        "dagster": settings.dagster_home(),
    }


def test_everything_defaults_to_the_working_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert locations() == {
        "warehouse": tmp_path / "warehouse.duckdb",
        "charts": tmp_path / "charts",
        "models_cache": tmp_path / "models_cache",
        "registry": tmp_path / "models.toml",
        "dagster": tmp_path / ".dagster",
    }


def test_attn_home_moves_everything(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ATTN_HOME", str(tmp_path / "home"))
    assert {name: path.relative_to(tmp_path / "home").as_posix() for name, path in locations().items()} == {
        "warehouse": "warehouse.duckdb",
        "charts": "charts",
        "models_cache": "models_cache",
        "registry": "models.toml",
        "dagster": ".dagster",
    }


def test_a_moved_warehouse_keeps_its_charts_and_run_history_beside_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ATTN_WAREHOUSE", str(tmp_path / "elsewhere" / "w.duckdb"))
    found = locations()
    assert (found["charts"], found["dagster"]) == (
        tmp_path / "elsewhere" / "charts",
        tmp_path / "elsewhere" / ".dagster",
    )
    assert found["models_cache"] == tmp_path / "models_cache"  # weights are shared between warehouses
    monkeypatch.setenv("ATTN_CHARTS_DIR", str(tmp_path / "c"))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "d"))
    assert (settings.charts_dir(), settings.dagster_home()) == (tmp_path / "c", tmp_path / "d")


def test_the_shipped_files_are_found() -> None:
    assert (settings.SQL_DIR / "schema" / "batches.sql").is_file()
    assert all((settings.SHIPPED_DIR / name).is_file() for name in settings.STARTER_FILES)
    assert settings.INSTANCE_SETTINGS.is_file()


def test_the_instance_settings_live_outside_the_run_history(monkeypatch: pytest.MonkeyPatch) -> None:
    """A clone run from its top level keeps its run history in .dagster/ there: the settings every
    new history starts from are not in it, where clearing the history would take them too."""
    monkeypatch.delenv("ATTN_WAREHOUSE", raising=False)
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    monkeypatch.setenv("ATTN_HOME", str(settings.PROJECT_ROOT))
    assert settings.dagster_home() == settings.PROJECT_ROOT / ".dagster"
    assert not settings.INSTANCE_SETTINGS.is_relative_to(settings.dagster_home())
    assert (
        settings.INSTANCE_SETTINGS.parent == settings.SHIPPED_DIR and ".dagster" not in settings.INSTANCE_SETTINGS.parts
    )


def test_the_data_directory_is_a_checkouts_shared_data_else_the_users_data_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ATTN_DATA_DIR", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))  # platformdirs' user data folder on Linux
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ATTN_HOME", str(tmp_path / "checkout"))
    if sys.platform == "linux":
        assert settings.data_dir() == tmp_path / "xdg" / "attention-warehouse" / "corpora"
    (tmp_path / "shared" / "data").mkdir(parents=True)
    assert settings.data_dir() == tmp_path / "shared" / "data"
    monkeypatch.setenv("ATTN_DATA_DIR", str(tmp_path / "mine"))
    assert settings.data_dir() == tmp_path / "mine"
