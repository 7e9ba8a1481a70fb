"""`attn-warehouse` on a DuckLake, run as a user types it (a subprocess, settings in the
environment): a read before any run says there is no lake yet and how to create one; `run`
creates and fills it; a second run's plan (`run --dry-run`) leaves the upstream assets alone and
writes nothing; `sql`, `export` and `report` read it; and the catalog's password never reaches
stdout, stderr or the run log."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dagster_project import settings
from tests.runs import planned_steps
from tests.servers import POSTGRES_PASSWORD, PostgresServer, S3Server

# A run's writes land in a new Dagster instance and lake; generous for a busy 2-core machine.
TIMEOUT_S = 240


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "dagster_project.cli", *args],
        cwd=settings.PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )


def _env(tmp_path: Path, catalog: str, data_path: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The user's environment: the lake's two settings, and fresh folders for everything else
    (the demo corpus is built in, so the data folder stays empty)."""
    (tmp_path / "data").mkdir()
    env = {name: value for name, value in os.environ.items() if not name.startswith(("ATTN_", "AWS_"))}
    return env | {
        "ATTN_WAREHOUSE_BACKEND": "ducklake",
        "ATTN_LAKE_CATALOG": catalog,
        "ATTN_LAKE_DATA_PATH": data_path,
        "ATTN_WAREHOUSE": str(tmp_path / "never-used.duckdb"),
        "ATTN_DATA_DIR": str(tmp_path / "data"),
        "ATTN_CHARTS_DIR": str(tmp_path / "charts"),
        "DAGSTER_HOME": str(tmp_path / "dagster"),
        "ATTN_DEVICE": "cpu",
        "HF_HUB_OFFLINE": "1",
        "OMP_WAIT_POLICY": "PASSIVE",
        **(extra or {}),
    }


def _ok(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout


def _run_the_commands(
    env: dict[str, str], model_dir: Path, tmp_path: Path, shown_catalog: str, planned_again: bool
) -> list[str]:
    """sql before any run, a run, `planned_again`: its second run's plan (a dry run), sql, export,
    and otherwise the report; returns every output and run log, for the caller's checks of what must
    never be printed."""
    before = _cli(env, "sql", "SELECT count(*) FROM head_summaries")
    assert before.returncode == 2
    assert f"error: no DuckLake at {shown_catalog} yet: `attn-warehouse run --corpus demo` creates it" in before.stderr
    assert "unable to open" not in before.stderr.lower()

    first = _ok(_cli(env, "run", str(model_dir), "--corpus", "demo", "--analysis", "attention"))
    assert "demo_attention_facts" in first and f"warehouse: DuckLake (catalog {shown_catalog}, data " in first
    outputs = [before.stdout, before.stderr, first]
    if planned_again:
        args = ("run", str(model_dir), "--corpus", "demo", "--analysis", "attention", "--dry-run")
        outputs.append(_ok(_cli(env, *args)))
        assert "up to date, not re-run: demo_examples, encoder_model" in outputs[-1]
        steps = planned_steps(outputs[-1])
        assert "demo_attention_facts" in steps and "paper_report" in steps
        assert not {"demo_examples", "encoder_model", "warehouse_views"} & set(steps)

    # one batch per table (the dry run wrote none): 2 layers x 4 heads x 24 demo examples
    counts = _ok(
        _cli(
            env,
            "sql",
            "SELECT concat_ws(' ', 'counts', (SELECT count(*) FROM batches WHERE table_name = 'examples'), "
            "(SELECT count(*) FROM batches WHERE table_name = 'head_summaries'), "
            "(SELECT count(*) FROM head_summaries), (SELECT count(*) FROM stg_head_summaries)) AS counts",
        )
    )
    assert "counts 1 1 192 192" in counts

    out = tmp_path / "special.csv"
    exported = _ok(_cli(env, "export", "clark_special_tokens", "--format", "csv", "--out", str(out)))
    assert exported.strip() == f"{out}: 8 rows of clark_special_tokens"  # 2 layers x 4 heads
    assert out.read_text().splitlines()[0].startswith("model,model_id,corpus,layer,head,to_cls,")
    outputs += [counts, exported]
    if not planned_again:
        report = _ok(_cli(env, "report", "--out", str(tmp_path / "report")))
        assert report.startswith(f"report: {tmp_path / 'report' / 'index.html'} (5 paper pages, models: local--")
        outputs.append(report)
    return outputs + [log.read_text() for log in (tmp_path / "dagster" / "run_logs").glob("*.log")]


def test_cli_on_a_sqlite_catalog_and_a_folder(tmp_path: Path, tiny_model_dir: Path):
    catalog = tmp_path / "lake" / "catalog.sqlite"
    env = _env(tmp_path, str(catalog), str(tmp_path / "lake" / "data"))
    _run_the_commands(env, tiny_model_dir, tmp_path, str(catalog), planned_again=True)
    parquet = list((tmp_path / "lake" / "data" / "main" / "head_summaries").rglob("*.parquet"))
    assert {file.parent.name for file in parquet} == {"corpus=demo"} and len(parquet) == 1


def test_cli_on_a_postgres_catalog_and_s3_never_prints_the_password(
    tmp_path: Path, tiny_model_dir: Path, postgres_server: PostgresServer, s3_server: S3Server
):
    database = postgres_server.create_database()
    bucket = s3_server.create_bucket()
    env = _env(tmp_path, postgres_server.url(database), f"s3://{bucket}/lake/", s3_server.env())
    shown = postgres_server.url(database).replace(POSTGRES_PASSWORD, "***")
    # the second run's plan is the same on every catalog (test_cli_on_a_sqlite_catalog_and_a_folder)
    outputs = _run_the_commands(env, tiny_model_dir, tmp_path, shown, planned_again=False)
    assert not [text for text in outputs if POSTGRES_PASSWORD in text]
    assert any(key.endswith(".parquet") for key in s3_server.keys(bucket, "lake/main/head_summaries/"))


def test_cli_registers_a_model_in_a_postgres_catalog_and_masks_an_unreachable_one(
    tmp_path: Path, tiny_model_dir: Path, postgres_server: PostgresServer
):
    database = postgres_server.create_database()
    env = _env(tmp_path, postgres_server.url(database), str(tmp_path / "lake-data"))
    # a registration outside a run reads the catalog from the environment, creates the lake, prints no password
    added = _cli(env, "add-model", str(tiny_model_dir))
    assert "registered" in _ok(added) and POSTGRES_PASSWORD not in added.stdout + added.stderr
    models = _ok(_cli(env, "sql", "SELECT 'source ' || source AS s FROM models"))
    assert f"source {tiny_model_dir}" in models

    # the catalog unreachable: one line, password masked, exit status 2
    closed = postgres_server.url(database).replace(f":{postgres_server.port}/", ":1/")
    failed = _cli(env | {"ATTN_LAKE_CATALOG": closed}, "sql", "SELECT 1")
    assert failed.returncode == 2 and POSTGRES_PASSWORD not in failed.stdout + failed.stderr
    assert f"cannot open the DuckLake catalog {closed.replace(POSTGRES_PASSWORD, '***')}" in failed.stderr


@pytest.mark.parametrize("catalog_name", ["catalog.ducklake", "catalog.sqlite"])
def test_the_ui_resources_resolve_on_a_lake(tmp_path: Path, catalog_name: str):
    """What `attn-warehouse ui` loads (the definitions of workspace.yaml) resolves the warehouse
    resource from the environment and reaches the lake through it; its repr shows no password."""
    env = _env(tmp_path, str(tmp_path / catalog_name), str(tmp_path / "data-lake"))
    script = (
        "from dagster_project.definitions import defs\n"
        "warehouse = defs.resources['warehouse']\n"
        "with warehouse.get_connection() as conn:\n"
        "    print(conn.execute('SELECT current_database()').fetchone()[0], warehouse.lake())\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=settings.PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert _ok(result).strip() == f"lake LakeConfig(catalog={str(tmp_path / catalog_name)!r}, " + (
        f"data_path={str(tmp_path / 'data-lake')!r})"
    )
