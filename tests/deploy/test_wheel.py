"""The package as a user installs it: the wheel built from the repository, installed
non-editable into a fresh virtual environment (no system site packages; dependencies from pip's
cache and configured indexes), run from an empty folder. The warehouse, the charts' and the
run history's folders appear in that folder and nothing is written into site-packages.
Selected with `-m wheel`; about two minutes, most of it installing the dependencies."""

import os
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import duckdb
import pytest

from dagster_project import settings

pytestmark = pytest.mark.wheel

# The locations a user's environment could move; the test runs with none of them set.
LOCATION_SETTINGS = (
    "ATTN_HOME",
    "ATTN_WAREHOUSE",
    "ATTN_WAREHOUSE_BACKEND",
    "ATTN_CHARTS_DIR",
    "ATTN_MODELS_CACHE",
    "ATTN_MODELS_REGISTRY",
    "DAGSTER_HOME",
)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--quiet",
            "--wheel-dir",
            str(dist),
            str(settings.PROJECT_ROOT),
        ],
        check=True,
        capture_output=True,
    )
    (built,) = dist.glob("attention_warehouse-*.whl")
    return built


@pytest.fixture(scope="module")
def environment(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Path:
    """A fresh virtual environment with the wheel installed (not editable); its folder."""
    folder = tmp_path_factory.mktemp("venv")
    venv.create(folder, with_pip=True)
    subprocess.run([str(folder / "bin" / "pip"), "install", "--quiet", str(wheel)], check=True, capture_output=True)
    return folder


def user_env(**extra: str) -> dict[str, str]:
    env = {name: value for name, value in os.environ.items() if name not in LOCATION_SETTINGS}
    return env | {"ATTN_DATA_DIR": str(settings.data_dir())} | extra


def attn_warehouse(environment: Path, *args: str, cwd: Path, **extra_env: str) -> subprocess.CompletedProcess:
    """The installed CLI, run in `cwd` with none of the location settings but `extra_env`."""
    command = [str(environment / "bin" / "attn-warehouse"), *args]
    return subprocess.run(command, cwd=cwd, env=user_env(**extra_env), capture_output=True, text=True)


def site_packages_files(environment: Path) -> set[Path]:
    """What the environment's site-packages holds, Python's bytecode caches aside."""
    (site_packages,) = environment.glob("lib/python*/site-packages")
    return {path for path in site_packages.rglob("*") if "__pycache__" not in path.parts}


def test_the_wheel_carries_the_sql_and_the_starter_files(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    repository_sql = {
        path.relative_to(settings.PROJECT_ROOT).as_posix() for path in settings.PROJECT_ROOT.glob("sql/**/*.sql")
    }
    assert len(repository_sql) > 100
    assert {f"dagster_project/shipped/{name}" for name in repository_sql} <= names
    assert {f"dagster_project/shipped/{name}" for name in (*settings.STARTER_FILES, ".dagster/dagster.yaml")} <= names


def test_a_run_from_an_empty_folder_writes_the_warehouse_there(environment: Path, tmp_path: Path) -> None:
    before = site_packages_files(environment)
    assert attn_warehouse(environment, "--version", cwd=tmp_path).stdout.strip() == "attn-warehouse 0.1.0"

    run = attn_warehouse(environment, "run", "--corpus", "demo", "--analysis", "attention", cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert {path.name for path in tmp_path.iterdir()} >= {"warehouse.duckdb", ".dagster", "charts"}
    assert (tmp_path / ".dagster" / "dagster.yaml").read_text() == settings.INSTANCE_SETTINGS.read_text()
    with duckdb.connect(str(tmp_path / "warehouse.duckdb"), read_only=True) as conn:
        (examples,) = conn.execute("SELECT count(*) FROM examples WHERE corpus = 'demo'").fetchone()
        (summaries,) = conn.execute("SELECT count(*) FROM head_summaries WHERE corpus = 'demo'").fetchone()
    assert examples == 24 and summaries > 0
    assert site_packages_files(environment) == before


def test_init_writes_the_starter_files_into_attn_home(environment: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    cli = str(environment / "bin" / "attn-warehouse")
    first = subprocess.run(
        [cli, "init"], cwd=tmp_path, env=user_env(ATTN_HOME=str(home)), capture_output=True, text=True
    )
    assert first.returncode == 0, first.stderr
    for name in settings.STARTER_FILES:
        assert (home / name).read_text() == (settings.SHIPPED_DIR / name).read_text()
    (home / "models.toml").write_text("# mine\n")
    again = subprocess.run(
        [cli, "init"], cwd=tmp_path, env=user_env(ATTN_HOME=str(home)), capture_output=True, text=True
    )
    assert f"kept {home / 'models.toml'}" in again.stdout
    assert (home / "models.toml").read_text() == "# mine\n"
    assert not (tmp_path / "models.toml").exists()
