"""The Dagster instance on PostgreSQL (deploy/dagster.yaml) against a real server started by the
tests (tests/servers.py): the driver pitfall of SQLAlchemy 2.1, pools set up front by
`attn-warehouse pools`, and several runs at once with the multiprocess executor, whose
warehouse_writer steps never overlap."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
import sqlalchemy
import yaml
from dagster import DagsterEventType, DagsterInstance, DagsterRunStatus, materialize

from dagster_project.cli import main
from dagster_project.defs.assets import warehouse_views
from dagster_project.defs.pools import GPU, WAREHOUSE_WRITER
from dagster_project.defs.registration import register_model
from dagster_project.defs.resources import ChartFolder, DataDirectory, WarehouseResource
from dagster_project.settings import PROJECT_ROOT
from dagster_project.storage.backend import BACKEND_SETTING
from tests.servers import POSTGRES_PASSWORD, POSTGRES_USER, PostgresServer, stretched

pytest.importorskip("dagster_postgres", reason="dagster-postgres is in the scale extra: pip install -e '.[scale]'")

INSTANCE_YAML = PROJECT_ROOT / "deploy" / "dagster.yaml"
DAGSTER = str(Path(sys.executable).with_name("dagster"))
PER_MODEL = 24 * 2 * 4  # head_summaries rows: demo examples x layers x heads of the tiny model


@pytest.fixture
def postgres_home(postgres_server: PostgresServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """DAGSTER_HOME holding deploy/dagster.yaml as shipped, the connection in the environment
    (a new database on the session's server)."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(INSTANCE_YAML, home / "dagster.yaml")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    monkeypatch.setenv("DAGSTER_PG_HOST", "127.0.0.1")
    monkeypatch.setenv("DAGSTER_PG_PORT", str(postgres_server.port))
    monkeypatch.setenv("DAGSTER_PG_USER", POSTGRES_USER)
    monkeypatch.setenv("DAGSTER_PG_PASSWORD", POSTGRES_PASSWORD)
    monkeypatch.setenv("DAGSTER_PG_DB", postgres_server.create_database())
    monkeypatch.delenv(BACKEND_SETTING, raising=False)
    return home


def test_the_example_instance_keeps_runs_and_pools_in_postgres(postgres_home: Path) -> None:
    with DagsterInstance.from_config(str(postgres_home)) as instance:
        assert type(instance.run_storage).__name__ == "PostgresRunStorage"
        assert type(instance.event_log_storage).__name__ == "PostgresEventLogStorage"
        assert instance.event_log_storage.supports_global_concurrency_limits
        assert instance.event_log_storage.get_concurrency_keys() == set()


def test_a_plain_postgresql_scheme_needs_psycopg3(postgres_home: Path) -> None:
    """Why deploy/dagster.yaml names the driver: without `scheme`, dagster-postgres builds
    postgresql://, which SQLAlchemy 2.1 hands to psycopg 3, not installed by dagster-postgres."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("psycopg 3 is installed here, so a plain postgresql:// scheme works")
    config = yaml.safe_load(INSTANCE_YAML.read_text())
    del config["storage"]["postgres"]["postgres_db"]["scheme"]
    (postgres_home / "dagster.yaml").write_text(yaml.safe_dump(config))
    with pytest.raises(ModuleNotFoundError, match="No module named 'psycopg'"):
        DagsterInstance.from_config(str(postgres_home))


def test_a_pool_created_twice_from_the_default_limit_fails_on_postgres(postgres_home: Path) -> None:
    """Why the pools are set up front: with `concurrency.pools.default_limit`, the first step to
    meet a pool inserts its limit. When two runs do that at once, the second INSERT hits the
    unique key and Dagster falls back to an UPDATE in the same transaction, which Postgres has
    aborted (SQLite would go on). Creating the pool a second time is that losing side."""
    config = yaml.safe_load(INSTANCE_YAML.read_text())
    config["concurrency"] = {"pools": {"default_limit": 1}}
    (postgres_home / "dagster.yaml").write_text(yaml.safe_dump(config))
    with DagsterInstance.from_config(str(postgres_home)) as instance:
        storage = instance.event_log_storage
        assert storage.initialize_concurrency_limit_to_default(WAREHOUSE_WRITER)
        with pytest.raises(sqlalchemy.exc.InternalError, match="current transaction is aborted"):
            storage.initialize_concurrency_limit_to_default(WAREHOUSE_WRITER)


def test_attn_warehouse_pools_sets_the_pools_of_the_backend(
    postgres_home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for _ in range(2):  # setting a limit again is fine, unlike creating a pool from the default twice
        assert main(["pools"]) == 0
        assert f"pool {WAREHOUSE_WRITER}: limit 1" in capsys.readouterr().out
    assert main(["pools", "--gpus", "2"]) == 2
    assert "no gpu pool to size" in capsys.readouterr().err
    monkeypatch.setenv(BACKEND_SETTING, "ducklake")
    assert main(["pools", "--gpus", "3"]) == 0
    assert f"pool {GPU}: limit 3" in capsys.readouterr().out
    assert main(["pools", "--gpus", "0"]) == 2
    assert "at least 1 device" in capsys.readouterr().err
    with DagsterInstance.from_config(str(postgres_home)) as instance:
        storage = instance.event_log_storage
        assert storage.get_concurrency_keys() == {WAREHOUSE_WRITER, GPU}
        assert storage.get_concurrency_info(WAREHOUSE_WRITER).slot_count == 1
        assert storage.get_concurrency_info(GPU).slot_count == 3


def _copy_model(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    return target


def test_concurrent_runs_with_the_multiprocess_executor_share_the_writer_pool(
    postgres_home: Path, tiny_model_dir: Path, tmp_path: Path
) -> None:
    """Two runs at once, each materializing the demo corpus and its attention facts for its own
    model partition in step subprocesses (the multiprocess executor): both succeed, and the
    pool set up front lets one warehouse_writer step run at a time across the runs."""
    warehouse_file = tmp_path / "warehouse.duckdb"
    env = {
        **os.environ,
        "ATTN_WAREHOUSE": str(warehouse_file),
        "ATTN_CHARTS_DIR": str(tmp_path / "charts"),
        "ATTN_DATA_DIR": str(tmp_path / "no-data"),
        "OMP_NUM_THREADS": "1",
    }
    assert main(["pools"]) == 0
    warehouse = WarehouseResource(database=str(warehouse_file))
    resources = {
        "warehouse": warehouse,
        "data_dir": DataDirectory(path=env["ATTN_DATA_DIR"]),
        "chart_folder": ChartFolder(path=env["ATTN_CHARTS_DIR"]),
    }
    run_config = tmp_path / "run_config.yaml"
    # forkserver: the step processes fork from one that imported the definitions once per run.
    forkserver = {"preload_modules": ["dagster_project.definitions"]}
    executor = {"max_concurrent": 2, "start_method": {"forkserver": forkserver}}
    run_config.write_text(yaml.safe_dump({"execution": {"config": {"multiprocess": executor}}}))
    with DagsterInstance.from_config(str(postgres_home)) as instance:
        model_ids = [
            register_model(str(_copy_model(tiny_model_dir, tmp_path / f"model_{index}")), instance, warehouse).model_id
            for index in range(2)
        ]
        assert materialize([warehouse_views], instance=instance, resources=resources).success
        runs = [
            subprocess.Popen(
                [DAGSTER, "asset", "materialize", "-m", "dagster_project.definitions"]
                + ["--select", "demo_examples,demo_attention_facts", "--partition", model_id, "-c", str(run_config)],
                cwd=PROJECT_ROOT,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            for model_id in model_ids
        ]
        # Ten quiet minutes, stretched by the load: at load 20 on 2 cores this test took 607 s.
        outputs = [run.communicate(timeout=stretched(600))[0] for run in runs]
        assert [run.returncode for run in runs] == [0, 0], [output[-3000:] for output in outputs]

        asset_runs = [run for run in instance.get_runs() if run.tags.get("dagster/partition") in model_ids]
        assert sorted(run.tags["dagster/partition"] for run in asset_runs) == sorted(model_ids)
        assert {run.status for run in asset_runs} == {DagsterRunStatus.SUCCESS}
        spans = []
        for run in asset_runs:
            assert run.run_config["execution"]["config"]["multiprocess"]["max_concurrent"] == 2
            times: dict[str, list[float]] = {}
            for kind in (DagsterEventType.STEP_START, DagsterEventType.STEP_SUCCESS):
                for entry in instance.all_logs(run.run_id, of_type=kind):
                    times.setdefault(entry.step_key, []).append(entry.timestamp)
            # the facts' asset check (facts_match_examples) runs as a step of its own; it only reads
            writers = ["demo_attention_facts", "demo_examples"]
            assert sorted(times) == sorted([*writers, "demo_attention_facts_facts_match_examples"])
            spans += [(*times[step], run.run_id, step) for step in writers]
        spans.sort()
        overlaps = [(a, b) for a, b in zip(spans, spans[1:]) if b[0] < a[1]]
        assert overlaps == [], "warehouse_writer steps ran at the same time"
    with duckdb.connect(str(warehouse_file), read_only=True) as conn:
        counts = dict(conn.execute("SELECT model_id, count(*) FROM head_summaries GROUP BY model_id").fetchall())
    assert counts == {model_id: PER_MODEL for model_id in model_ids}
