"""A run's config checked where it is given (defs/run_config.py): `run` and `run --dry-run` refuse a
value of the wrong type, a size under 1, an unknown overlong and a max_len over the model's positions
or the examples' columns with the same one line, exit status 2, before anything is registered or
written; and the corpus asset refuses such a max_len itself, before it writes, when run otherwise."""

from pathlib import Path

import pytest
from dagster import AssetKey, instance_for_test, materialize

from dagster_project.cli import main
from dagster_project.defs.registration import register_model


@pytest.mark.parametrize(
    ("setting", "line"),
    [
        (
            "size=abc",
            'error: run config: Invalid scalar at path root:ops:demo_examples:config:size. Value "abc" of type '
            '"<class \'str\'>" is not valid for expected type "Int". (fix the --set or --config value)',
        ),
        (
            "size=-5",
            "error: demo_examples: run config size must be at least 1, got -5 (leave it out for the corpus's default)",
        ),
        (
            "overlong=bogus",
            "error: demo_examples: run config overlong must be one of ('drop', 'truncate'), got 'bogus'",
        ),
        (
            "max_len=100000",
            "error: demo_examples: run config max_len 100000 is more than the 160 positions of the model (bert), "
            "which takes no longer input: set max_len to at most 160 (or leave it out for the corpus's default)",
        ),
    ],
)
def test_a_dry_run_refuses_the_config_the_run_refuses_with_the_same_line(
    setting: str, line: str, env: Path, tiny_model_dir: Path, capsys: pytest.CaptureFixture
) -> None:
    run = [
        "run",
        str(tiny_model_dir),
        "--corpus",
        "demo",
        "--analysis",
        "attention",
        "--set",
        f"demo_examples.{setting}",
    ]
    assert main([*run, "--dry-run"]) == 2
    dry = capsys.readouterr()
    assert dry.err == f"{line}\n"
    assert "would run" not in dry.out
    assert main(run) == 2
    assert capsys.readouterr().err == dry.err
    assert not env.exists()  # nothing registered, nothing written


def test_the_corpus_asset_refuses_a_max_len_over_the_positions_before_it_writes(
    resources: dict, tiny_model_dir: Path
) -> None:
    from dagster_project.defs.assets import all_assets

    with instance_for_test() as instance:
        model_id = register_model(str(tiny_model_dir), instance, resources["warehouse"]).model_id
        result = materialize(
            all_assets,
            selection=[AssetKey("demo_examples")],
            partition_key=model_id,
            instance=instance,
            resources=resources,
            run_config={"ops": {"demo_examples": {"config": {"max_len": 200}}}},
            raise_on_error=False,
        )
    (failure,) = result.get_step_failure_events()
    error = failure.step_failure_data.error
    assert "run config max_len 200 is more than the 160 positions of the model" in (error.cause or error).message
    with resources["warehouse"].get_connection() as conn:
        assert conn.execute("SELECT count(*) FROM examples").fetchone() == (0,)
