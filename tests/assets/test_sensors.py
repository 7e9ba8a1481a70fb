import json
import time
from pathlib import Path

import duckdb
import pytest
from dagster import (
    DagsterInstance,
    DefaultScheduleStatus,
    DefaultSensorStatus,
    Definitions,
    SensorResult,
    build_sensor_context,
    instance_for_test,
    materialize,
)
from dagster_duckdb import DuckDBResource

from dagster_project.compute.models import ModelSpec, inspect_model, model_key
from dagster_project.defs import sensors
from dagster_project.defs.assets import all_assets, warehouse_views
from dagster_project.defs.jobs import ANALYSES, analysis_asset_keys, model_analysis_job
from dagster_project.defs.partitions import model_partitions
from dagster_project.defs.resources import ChartFolder, ComputeResource, DataDirectory
from dagster_project.defs.sensors import model_registry_sensor


@pytest.fixture
def instance() -> DagsterInstance:
    with instance_for_test() as test_instance:
        yield test_instance


@pytest.fixture
def resources(tmp_path: Path) -> dict:
    return {
        "warehouse": DuckDBResource(database=str(tmp_path / "warehouse.duckdb")),
        "data_dir": DataDirectory(path=str(tmp_path / "no-data")),
    }


@pytest.fixture
def registry(tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The tiny model with both analyses, an unknown hub id, and a broken dropped checkpoint."""
    path = tmp_path / "models.toml"
    path.write_text(
        f'[[model]]\nsource = "{tiny_model_dir}"\nanalyses = ["attention", "hta"]\n\n'
        '[[model]]\nsource = "no-such-org/no-such-encoder"\n'
    )
    broken = tmp_path / "cache" / "drop" / "broken"
    broken.mkdir(parents=True)
    (broken / "config.json").write_text('{"model_type": "not-a-model"}')
    monkeypatch.setenv("ATTN_MODELS_REGISTRY", str(path))
    monkeypatch.setenv("ATTN_MODELS_CACHE", str(tmp_path / "cache"))
    return path


# What the hta analysis adds on the demo corpus (slow, left out where a test executes a run).
HTA = set(analysis_asset_keys(ANALYSES["hta"], ["demo"], ["demo"])) - set(
    analysis_asset_keys(ANALYSES["attention"], ["demo"], ["demo"])
)


def tick(instance: DagsterInstance, resources: dict, cursor: str | None) -> SensorResult:
    with build_sensor_context(instance=instance, cursor=cursor, resources=resources) as context:
        result = model_registry_sensor(context)
    for request in result.dynamic_partitions_requests or []:  # what the daemon does with them
        instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
    return result


def test_registers_requests_once_per_model_and_analysis_and_reports_bad_entries(
    instance: DagsterInstance, resources: dict, registry: Path, tiny_model_dir: Path, tmp_path: Path
) -> None:
    tiny = model_key(str(tiny_model_dir))

    first = tick(instance, resources, None)
    # The views are created first; the model runs wait for them, the partition is added now.
    assert [(run.job_name, run.run_key) for run in first.run_requests] == [
        ("warehouse_views_job", first.run_requests[0].run_key)
    ]
    assert first.run_requests[0].run_key.startswith("warehouse_views:")
    assert first.dynamic_partitions_requests[0].partition_keys == [tiny]
    first_state = json.loads(first.cursor)
    assert first_state["launched"] == []
    # The unknown hub id waits before its next (slow, networked) try; the local broken folder does not.
    assert list(first_state["failed"]) == ["no-such-org/no-such-encoder"]
    assert "Could not load model" in first_state["failed"]["no-such-org/no-such-encoder"]["reason"]
    assert instance.get_dynamic_partitions(model_partitions.name) == [tiny]
    with duckdb.connect(resources["warehouse"].database, read_only=True) as conn:
        assert conn.execute("SELECT model_id, n_layers, n_heads FROM models").fetchall() == [(tiny, 2, 4)]

    materialize([warehouse_views], instance=instance, resources={"warehouse": resources["warehouse"]})
    second = tick(instance, resources, first.cursor)
    # One run for the model's two analyses, so the corpus they share is built once.
    (request,) = second.run_requests
    assert request.run_key == f"{tiny}:attention+{tiny}:hta" and request.partition_key == tiny
    assert set(json.loads(second.cursor)["launched"]) == {f"{tiny}:attention", f"{tiny}:hta"}
    # No data directory: only the built-in demo corpus.
    selection = {key.to_user_string() for key in request.asset_selection}
    assert {
        "encoder_model",
        "demo_examples",
        "demo_attention_facts",
        "clark_fig2_special_tokens",
        "pascual_fig2_attention_histograms",
        "demo_hta_facts",
        "pascual_fig1_local_correlation",
        "pascual_fig6_global_correlation",
        "paper_report",
    } <= selection
    assert not {key for key in selection if key.startswith("wiki_segments") or key.startswith("xnli")}
    assert not second.dynamic_partitions_requests

    # The requested attention run executes as the model_analysis job would launch it.
    job = Definitions(
        assets=all_assets,
        jobs=[model_analysis_job],
        resources={
            **resources,
            "chart_folder": ChartFolder(path=str(tmp_path / "charts")),
            "compute": ComputeResource(),
        },
    ).resolve_job_def("model_analysis")
    assert (
        job.get_subset(asset_selection=set(request.asset_selection) - HTA)
        .execute_in_process(partition_key=request.partition_key, instance=instance)
        .success
    )
    # The run rebuilt the report: the model's charts are drawn, none says "no rows".
    page = (tmp_path / "charts" / "report" / "clark.html").read_text()
    assert f'data-model="{tiny}"' in page
    assert '<figure data-chart="clark_fig2_special_tokens">' in page
    assert 'class="missing" data-chart="clark_fig2_special_tokens"' not in page

    third = tick(instance, resources, second.cursor)
    assert not third.run_requests
    reasons = third.skip_reason.skip_message
    assert "models.toml [[model]] #2 (no-such-org/no-such-encoder): Could not load model" in reasons
    assert "(tried again after " in reasons
    assert "drop/broken: Could not load model" in reasons
    assert instance.get_dynamic_partitions(model_partitions.name) == [tiny]


@pytest.fixture
def inspected(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The sources the sensor loads, in order (the real inspect_model still runs)."""
    calls: list[str] = []

    def recording_inspect(source: str) -> ModelSpec:
        calls.append(source)
        return inspect_model(source)

    monkeypatch.setattr(sensors, "inspect_model", recording_inspect)
    return calls


def test_unloadable_hub_id_is_retried_only_after_the_wait_and_local_checkpoints_go_first(
    instance: DagsterInstance,
    resources: dict,
    registry: Path,
    tiny_model_dir: Path,
    tmp_path: Path,
    inspected: list[str],
) -> None:
    broken = str(tmp_path / "cache" / "drop" / "broken")
    first = tick(instance, resources, None)
    assert inspected == [str(tiny_model_dir), broken, "no-such-org/no-such-encoder"]

    inspected.clear()
    second = tick(instance, resources, first.cursor)
    # The tiny model is loaded again (its runs wait for the views); the hub id waits for its retry time.
    assert inspected == [str(tiny_model_dir), broken]
    assert json.loads(second.cursor)["failed"] == json.loads(first.cursor)["failed"]

    due = json.loads(second.cursor)
    due["failed"]["no-such-org/no-such-encoder"]["retry_at"] = time.time() - 1
    inspected.clear()
    tick(instance, resources, json.dumps(due))
    assert inspected == [str(tiny_model_dir), broken, "no-such-org/no-such-encoder"]


def test_entries_past_the_loading_budget_wait_for_the_next_tick(
    instance: DagsterInstance,
    resources: dict,
    registry: Path,
    tmp_path: Path,
    inspected: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sensors, "INSPECTION_BUDGET_SECONDS", 0)
    registry.write_text('[[model]]\nsource = "no-such-org/no-such-encoder"\n')
    broken = tmp_path / "cache" / "drop" / "broken"

    first = tick(instance, resources, None)
    assert inspected == [str(broken)]  # at least one load per tick, so every tick makes progress
    assert (
        "models.toml [[model]] #1 (no-such-org/no-such-encoder): not checked yet: this tick spent its 0 s"
        in first.skip_reason.skip_message
    )
    assert json.loads(first.cursor)["failed"] == {}

    (broken / "config.json").unlink()
    broken.rmdir()
    inspected.clear()
    second = tick(instance, resources, first.cursor)
    assert inspected == ["no-such-org/no-such-encoder"]
    assert "no-such-org/no-such-encoder): Could not load model" in second.skip_reason.skip_message


def test_malformed_registry_is_the_skip_reason(instance: DagsterInstance, resources: dict, registry: Path) -> None:
    registry.write_text("[[model]]\nsource = \n")
    with build_sensor_context(instance=instance, resources=resources) as context:
        result = model_registry_sensor(context)
    assert "is not valid TOML" in result.skip_message and "line 2" in result.skip_message


def test_definitions_run_the_sensor_and_the_refresh_schedule_by_default() -> None:
    from dagster_project.definitions import defs

    repository = defs.get_repository_def()
    assert repository.get_sensor_def("model_registry_sensor").default_status == DefaultSensorStatus.RUNNING
    assert repository.get_schedule_def("warehouse_refresh").default_status == DefaultScheduleStatus.RUNNING
    assert "demo_attention_facts" in {
        key.to_user_string() for key in repository.get_job("model_analysis").asset_layer.executable_asset_keys
    }


def test_a_locked_warehouse_makes_the_entry_wait_for_the_next_tick(
    instance: DagsterInstance,
    resources: dict,
    tiny_model_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tests.assets.test_warehouse_lock import held_by_another_process

    registry = tmp_path / "models.toml"
    registry.write_text(f'[[model]]\nsource = "{tiny_model_dir}"\n')
    monkeypatch.setenv("ATTN_MODELS_REGISTRY", str(registry))
    monkeypatch.setenv("ATTN_MODELS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(sensors, "LOCK_WAIT_SECONDS", 0.5)
    with held_by_another_process(Path(resources["warehouse"].database)):
        started = time.monotonic()
        result = tick(instance, resources, None)
        assert time.monotonic() - started < sensors.INSPECTION_BUDGET_SECONDS
    assert not result.run_requests and "locked by another process; next tick" in result.skip_reason.skip_message
    # Nothing was recorded as launched: the next tick, with the file free, registers it.
    assert tick(instance, resources, result.cursor).run_requests


def test_after_attn_warehouse_run_the_sensor_launches_nothing_for_that_model(
    tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dagster_project.cli import main

    for name, value in {
        "ATTN_WAREHOUSE": tmp_path / "warehouse.duckdb",
        "ATTN_DATA_DIR": tmp_path / "no-data",
        "ATTN_CHARTS_DIR": tmp_path / "charts",
        "DAGSTER_HOME": tmp_path / "dagster",
        "ATTN_MODELS_CACHE": tmp_path / "cache",
        "ATTN_MODELS_REGISTRY": tmp_path / "models.toml",
    }.items():
        monkeypatch.setenv(name, str(value))
    (tmp_path / "models.toml").write_text(f'[[model]]\nsource = "{tiny_model_dir}"\n')
    assert main(["run", str(tiny_model_dir), "--corpus", "demo"]) == 0
    resources = {
        "warehouse": DuckDBResource(database=str(tmp_path / "warehouse.duckdb")),
        "data_dir": DataDirectory(path=str(tmp_path / "no-data")),
    }
    with DagsterInstance.get() as instance:
        result = tick(instance, resources, None)
    tiny = model_key(str(tiny_model_dir))
    assert not result.run_requests
    # (clark has nothing to run on the demo corpus alone, for the CLI as for the sensor)
    assert "attention: already materialized at the current code version" in result.skip_reason.skip_message
    assert json.loads(result.cursor)["launched"] == [f"{tiny}:attention"]


def test_a_language_given_to_a_registered_model_is_stored_once(
    instance: DagsterInstance,
    resources: dict,
    tmp_path: Path,
    tiny_model_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    inspected: list[str],
) -> None:
    """A model whose analyses were all requested is registered again when models.toml gives it a
    `language` (Pascual Fig. 4), which models.language then holds; the next tick loads nothing."""
    tiny = model_key(str(tiny_model_dir))
    path = tmp_path / "models.toml"
    path.write_text(f'[[model]]\nsource = "{tiny_model_dir}"\nanalyses = ["attention"]\nlanguage = "de"\n')
    monkeypatch.setenv("ATTN_MODELS_REGISTRY", str(path))
    monkeypatch.setenv("ATTN_MODELS_CACHE", str(tmp_path / "cache"))
    cursor = json.dumps({"launched": [f"{tiny}:attention"], "failed": {}})

    first = tick(instance, resources, cursor)
    assert inspected == [str(tiny_model_dir)] and not first.run_requests
    assert set(json.loads(first.cursor)["launched"]) == {f"{tiny}:attention", f"{tiny}:language=de"}
    with duckdb.connect(resources["warehouse"].database, read_only=True) as conn:
        assert conn.execute("SELECT model_id, language FROM models").fetchall() == [(tiny, "de")]
    tick(instance, resources, first.cursor)
    assert inspected == [str(tiny_model_dir)]
