"""Run planning (defs/run_planning.py): which of the assets a run config configures the run forces
again, read from the run config their latest materialization ran with; and the own run of a checkpoint
fine-tuned on SST-2, which computes the weighting faithfulness (planned only, nothing trained)."""

import json
import shutil
from pathlib import Path

import pytest
from dagster import AssetKey, Config, DagsterInstance, asset, materialize

from dagster_project.cli import main
from dagster_project.compute.kovaleva.finetuning import FINETUNED_ANALYSES, finetuned_checkpoint_dir
from dagster_project.compute.models import inspect_model
from dagster_project.defs.partitions import model_partitions
from dagster_project.defs.run_planning import PreparedRun, checkpoint_runs, configured_anew
from tests.runs import planned_steps, toy_sst2

KEY = AssetKey("demo_examples")


class SampleConfig(Config):
    size: int = 24
    seed: int = 0


@asset(key=KEY, partitions_def=model_partitions)
def sampled(config: SampleConfig) -> None:
    pass


def _config(**values: int) -> dict:
    return {"ops": {"demo_examples": {"config": values}}}


def test_a_step_that_ran_with_the_users_values_is_not_forced_again() -> None:
    instance = DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(model_partitions.name, ["m1", "m2"])
    assert materialize([sampled], instance=instance, partition_key="m1", run_config=_config(size=5)).success

    assert configured_anew(instance, _config(size=5), [KEY], "m1") == []  # a resumed run with the same --set
    assert configured_anew(instance, _config(size=6), [KEY], "m1") == [KEY]  # a new value
    assert configured_anew(instance, _config(size=5, seed=0), [KEY], "m1") == [KEY]  # seed was the default then
    assert configured_anew(instance, _config(size=5), [KEY], "m2") == [KEY]  # never materialized there

    assert materialize([sampled], instance=instance, partition_key="m1", run_config=_config(size=6, seed=1)).success
    assert configured_anew(instance, _config(size=5), [KEY], "m1") == [KEY]  # the latest run is what counts
    assert configured_anew(instance, _config(seed=1), [KEY], "m1") == []  # the values asked for, not all of them


def test_a_run_takes_the_values_of_its_own_assets_only() -> None:
    prepared = PreparedRun("m", "m", ["demo"], ["attention"], [KEY, AssetKey("paper_report")], [], [])
    config = {"ops": {"demo_examples": {"config": {"size": 5}}, "xnli_en_hta_facts": {"config": {"seed": 1}}}}
    assert prepared.own_config(config | {"loggers": {}}) == {
        "ops": {"demo_examples": {"config": {"size": 5}}},
        "loggers": {},
    }
    # every configured asset left out as current: no ops at all, which Dagster also accepts
    assert prepared.without_report().own_config({"ops": {"paper_report": {}}}) == {}


@pytest.fixture
def sst2_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every location in tmp_path, the data directory holding a toy SST-2. Returns the data directory."""
    toy_sst2(tmp_path / "data")
    monkeypatch.setenv("ATTN_WAREHOUSE", str(tmp_path / "warehouse.duckdb"))
    monkeypatch.setenv("ATTN_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("ATTN_CHARTS_DIR", str(tmp_path / "charts"))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))
    return tmp_path / "data"


FINETUNING_RUN = ["--corpus", "glue_sst2", "--analysis", "finetuning", "--dry-run"]


def test_the_sst2_checkpoint_is_planned_with_the_weighting_faithfulness_in_its_own_run(
    sst2_env: Path, tiny_model_dir: Path, tiny_classifier_dir: Path, capsys: pytest.CaptureFixture
) -> None:
    base = inspect_model(str(tiny_model_dir)).model_id
    # before the fine-tuning: the base's run fine-tunes, the checkpoint's first run would compute the faithfulness
    assert main(["run", str(tiny_model_dir), *FINETUNING_RUN]) == 0
    out = capsys.readouterr().out
    steps = planned_steps(out)
    assert "finetuned_sst2" in steps and "weighting_faithfulness" not in steps
    (line,) = [line for line in out.splitlines() if line.startswith("then, once fine-tuned, its sst2 checkpoint")]
    assert {"glue_sst2_attention_facts", "weighting_faithfulness", "compare_weightings_faithfulness"} <= set(
        line.split(": ")[-1].split(", ")
    )

    # once saved (a classifier, with the entry finetuned_sst2 writes), its own run is planned as any model's
    folder = finetuned_checkpoint_dir(base, "sst2")
    shutil.copytree(tiny_classifier_dir, folder)
    (folder / "recipe.json").write_text(json.dumps({"corpora": ["glue_sst2"], "analyses": list(FINETUNED_ANALYSES)}))
    tuned = inspect_model(str(folder)).model_id
    assert main(["run", str(tiny_model_dir), *FINETUNING_RUN]) == 0
    out = capsys.readouterr().out
    assert "weighting_faithfulness" not in planned_steps(out)
    (line,) = [line for line in out.splitlines() if line.startswith(f"then its sst2 checkpoint ({tuned})")]
    assert "weighting_faithfulness" in line.split(": ")[-1].split(", ")
    (run,) = checkpoint_runs(base, ["sst2"], register=False).values()
    assert (run.model_id, run.corpora, run.analyses) == (tuned, ["glue_sst2"], ["attention"])
    assert {"weighting_faithfulness", "compare_weightings_faithfulness"} <= set(run.step_names)
    assert "paper_report" not in run.step_names  # the base model's run writes it once the checkpoints are in
    assert not [line for line in run.skipped if "faithfulness" in line]


def test_a_model_without_a_classification_head_is_not_planned_the_faithfulness(
    sst2_env: Path, tiny_model_dir: Path, tiny_classifier_dir: Path, capsys: pytest.CaptureFixture
) -> None:
    attention = ["--corpus", "glue_sst2", "--analysis", "attention", "--dry-run"]
    assert main(["run", str(tiny_model_dir), *attention]) == 0
    out = capsys.readouterr().out
    assert "weighting faithfulness not scheduled" in out
    assert not {"weighting_faithfulness", "compare_weightings_faithfulness"} & set(planned_steps(out))
    assert main(["run", str(tiny_classifier_dir), *attention]) == 0  # a classifier of its own gets it
    out = capsys.readouterr().out
    assert "weighting faithfulness not scheduled" not in out
    assert {"weighting_faithfulness", "compare_weightings_faithfulness"} <= set(planned_steps(out))
