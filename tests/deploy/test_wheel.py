"""The package as a user installs it: the wheel built from the repository, installed
non-editable into a fresh virtual environment, run from an empty folder. The warehouse, the charts'
and the run history's folders appear in that folder and nothing is written into site-packages.
The environment finds the wheel's dependencies in the test's own environment (installing torch and
Dagster again took most of this file's two minutes), and `pip check` confirms the wheel's declared
requirements are met there. Selected with `-m wheel`."""

import os
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import duckdb
import pytest

from dagster_project import settings
from dagster_project.corpora.manifest import load_manifest

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
    """A fresh virtual environment with the wheel installed (not editable, without its dependencies),
    which finds the dependencies in this environment's site-packages through a path line in a .pth
    file (only the fresh environment's own .pth files run, so this environment's editable install of
    the project stays out); its folder."""
    folder = tmp_path_factory.mktemp("venv")
    venv.create(folder)  # no pip of its own: this environment's pip installs into it (--python)
    (site_packages,) = folder.glob("lib/python*/site-packages")
    (site_packages / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    pip = [sys.executable, "-m", "pip", "--python", str(folder / "bin" / "python")]
    subprocess.run([*pip, "install", "--quiet", "--no-deps", str(wheel)], check=True, capture_output=True)
    checked = subprocess.run([*pip, "check"], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr  # every requirement the wheel declares is met
    return folder


def user_env(**extra: str) -> dict[str, str]:
    env = {name: value for name, value in os.environ.items() if name not in LOCATION_SETTINGS}
    return env | {"ATTN_DATA_DIR": str(settings.data_dir())} | extra


def attn_warehouse(environment: Path, *args: str, cwd: Path, **extra_env: str) -> subprocess.CompletedProcess:
    """The installed CLI, run in `cwd` with none of the location settings but `extra_env`."""
    command = [str(environment / "bin" / "attn-warehouse"), *args]
    return subprocess.run(command, cwd=cwd, env=user_env(**extra_env), capture_output=True, text=True)


def attn_python(environment: Path, code: str, cwd: Path) -> subprocess.CompletedProcess:
    """The environment's Python running `code` in `cwd`."""
    command = [str(environment / "bin" / "python"), "-c", code]
    return subprocess.run(command, cwd=cwd, env=user_env(), capture_output=True, text=True, check=True)


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
    assert {f"dagster_project/shipped/{name}" for name in (*settings.STARTER_FILES, "dagster_instance.yaml")} <= names
    assert not [name for name in names if "/.dagster/" in name]  # no run-history folder in the package
    assert "dagster_project/corpora/manifest.yaml" in names


def test_a_run_from_an_empty_folder_writes_the_warehouse_there(environment: Path, tmp_path: Path) -> None:
    before = site_packages_files(environment)
    imported = attn_python(environment, "import dagster_project; print(dagster_project.__file__)", cwd=tmp_path)
    assert Path(imported.stdout.strip()).is_relative_to(environment)  # the wheel's copy, not the checkout
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


def test_data_list_on_a_fresh_install_shows_every_corpus_and_the_command_that_gets_it(
    environment: Path, tmp_path: Path
) -> None:
    listed = attn_warehouse(environment, "data", "list", cwd=tmp_path, ATTN_DATA_DIR=str(tmp_path / "data"))
    assert listed.returncode == 0, listed.stderr
    rows = {row.split()[0]: row for row in listed.stdout.splitlines()[2:29]}
    assert list(rows) == list(load_manifest())  # every corpus, in the manifest's order
    assert {row.split()[1] for row in rows.values()} == {"missing"}
    fetchable = {name: row for name, row in rows.items() if name != "conll2012"}
    assert all(row.endswith(f"  attn-warehouse data fetch {name}") for name, row in fetchable.items())
    assert rows["ud_ewt_test"].split()[2:5] == ["1.8", "MB", "Clark"]
    assert "CC BY-SA 4.0" in rows["ud_ewt_test"] and "not downloadable" in rows["conll2012"]
