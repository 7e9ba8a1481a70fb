"""A run's facts step computes from the examples its own run sampled (defs/assets/corpora.py
examples_read, storage/batches.py require_current_examples): two runs of the demo corpus with
sizes 12 and 16 on one DuckDB file, their steps interleaved in one process (run B sampled and
computed whole inside run A's facts step), end with run A failing, saying another run replaced
its examples, and the warehouse holding run B's examples and facts, never A's facts of B's examples."""

import re
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest
from dagster import (
    AssetCheckEvaluation,
    AssetCheckKey,
    AssetKey,
    AssetSelection,
    DagsterInstance,
    Definitions,
    ExecuteInProcessResult,
    define_asset_job,
    instance_for_test,
    materialize,
)

import dagster_project.defs.assets.facts as facts_module
from dagster_project.cli import main
from dagster_project.defs.registration import register_model
from dagster_project.presentation.consistency import facts_of_replaced_examples, replaced_examples_lines
from dagster_project.storage.views import apply_views
from tests.runs import materialize_model

EXAMPLES, FACTS = AssetKey("demo_examples"), AssetKey("demo_attention_facts")
PER_EXAMPLE = 2 * 4  # head_summaries rows of one example: the tiny model's layers x heads


@pytest.fixture
def instance() -> DagsterInstance:
    with instance_for_test() as test_instance:
        yield test_instance


@pytest.fixture
def model_id(instance: DagsterInstance, resources: dict, tiny_model_dir: Path) -> str:
    model_id = register_model(str(tiny_model_dir), instance, resources["warehouse"]).model_id
    materialize_model([AssetKey("encoder_model")], model_id, instance, resources)
    return model_id


def demo_run(
    model_id: str, instance: DagsterInstance, resources: dict, size: int, facts: dict | None = None
) -> ExecuteInProcessResult:
    """One run of the demo corpus's examples (`size` of them) and facts (with the run config `facts`),
    whatever its outcome."""
    from dagster_project.defs.assets import all_assets

    ops = {
        "demo_examples": {"config": {"size": size}},
        **({"demo_attention_facts": {"config": facts}} if facts else {}),
    }
    return materialize(
        all_assets,
        selection=AssetSelection.assets(EXAMPLES, FACTS),
        partition_key=model_id,
        instance=instance,
        resources=resources,
        run_config={"ops": ops},
        raise_on_error=False,
    )


def facts_of_replaced_examples_of(resources: dict) -> pl.DataFrame:
    with resources["warehouse"].get_connection() as conn:
        return facts_of_replaced_examples(conn)


def failure_message(result: ExecuteInProcessResult) -> str:
    (failure,) = result.get_step_failure_events()
    assert failure.step_key == FACTS.to_user_string()
    error = failure.step_failure_data.error
    return (error.cause or error).message


@pytest.mark.parametrize(
    "step",
    [
        "examples_read",  # B runs before A's facts step reads its tokens: refused before any work
        "load_encoder",  # B runs after A read its tokens: refused in the write's own transaction
    ],
)
def test_a_run_whose_examples_another_run_replaced_fails_and_the_other_holds_the_warehouse(
    step: str, model_id: str, instance: DagsterInstance, resources: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_b: list[ExecuteInProcessResult] = []
    original: Callable = getattr(facts_module, step)

    def first_run_b(*args, **kwargs):
        monkeypatch.setattr(facts_module, step, original)  # once: run B's own facts step runs as written
        run_b.append(demo_run(model_id, instance, resources, 16))
        return original(*args, **kwargs)

    monkeypatch.setattr(facts_module, step, first_run_b)
    run_a = demo_run(model_id, instance, resources, 12)

    assert run_b[0].success
    assert not run_a.success
    message = failure_message(run_a)
    assert "the demo examples of" in message and "were replaced by another run" in message
    assert "nothing was written" in message
    with resources["warehouse"].get_connection() as conn:
        assert conn.execute("SELECT count(*) FROM examples").fetchone() == (16,)
        assert conn.execute("SELECT count(DISTINCT example_id), count(*) FROM head_summaries").fetchone() == (
            16,
            16 * PER_EXAMPLE,
        )
        # the facts' batch names the examples batch the warehouse holds
        batches = dict(
            conn.execute(
                "SELECT table_name, coalesce(examples_batch_id, batch_id) FROM batches "
                "WHERE table_name IN ('examples', 'head_summaries')"
            ).fetchall()
        )
    assert batches["head_summaries"] == batches["examples"]


def test_a_run_that_samples_nothing_computes_from_the_examples_it_finds(
    model_id: str, instance: DagsterInstance, resources: dict
) -> None:
    assert demo_run(model_id, instance, resources, 12).success
    materialize_model([FACTS], model_id, instance, resources)  # a run of the facts alone
    with resources["warehouse"].get_connection() as conn:
        assert conn.execute("SELECT count(DISTINCT example_id) FROM head_summaries").fetchone() == (12,)


def run_facts_check(instance: DagsterInstance, resources: dict) -> AssetCheckEvaluation:
    """The demo facts' facts_match_examples, run on its own (as from the UI)."""
    from dagster_project.defs.assets import all_asset_checks, all_assets

    job = define_asset_job("facts_check", selection=AssetSelection.checks(AssetCheckKey(FACTS, "facts_match_examples")))
    definitions = Definitions(assets=all_assets, asset_checks=all_asset_checks, jobs=[job], resources=resources)
    result = definitions.resolve_job_def(job.name).execute_in_process(instance=instance)
    (evaluation,) = result.get_asset_check_evaluations()
    return evaluation


def test_facts_of_replaced_examples_fail_their_check_and_every_reader_says_so(
    model_id: str,
    instance: DagsterInstance,
    resources: dict,
    tiny_model_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
) -> None:
    with resources["warehouse"].get_connection() as conn:
        apply_views(conn)
    assert demo_run(model_id, instance, resources, 12).success
    assert run_facts_check(instance, resources).passed
    # a run samples 16 examples anew, and its facts step fails: the warehouse holds 16 examples, 12's facts
    failed = demo_run(model_id, instance, resources, 16, facts={"word_mode": "bogus"})
    assert not failed.success and "word_mode must be one of" in failure_message(failed)

    fix = f"attn-warehouse run {tiny_model_dir} --corpus demo"
    with resources["warehouse"].get_connection() as conn:
        assert facts_of_replaced_examples(conn).select("model_id", "corpus", "fix").rows() == [(model_id, "demo", fix)]
    evaluation = run_facts_check(instance, resources)
    assert not evaluation.passed
    assert evaluation.metadata["mixed_models"].value == 1
    assert f"`{fix}` writes facts of the current examples" in evaluation.description

    monkeypatch.setenv("ATTN_WAREHOUSE", resources["warehouse"].database)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))  # `main` points it at the project's instance
    capsys.readouterr()  # the runs' logs
    assert main(["sql", "SELECT count(*) AS n FROM stg_examples"]) == 0
    out, err = capsys.readouterr()
    assert re.search(r"│ 16\s+│", out)
    assert err == f"{replaced_examples_lines(facts_of_replaced_examples_of(resources))[0]}\n"
    assert f"warning: the demo facts of {tiny_model_dir} were computed from examples" in err
    assert main(["scorecard"]) == 0
    assert capsys.readouterr().err == err

    materialize_model([FACTS], model_id, instance, resources)  # the fix: facts of the current examples
    assert run_facts_check(instance, resources).passed
    assert facts_of_replaced_examples_of(resources).is_empty()
