"""Run planning (defs/run_planning.py): which of the assets a run config configures the run forces
again, read from the run config their latest materialization ran with."""

from dagster import AssetKey, Config, DagsterInstance, asset, materialize

from dagster_project.defs.partitions import model_partitions
from dagster_project.defs.run_planning import PreparedRun, configured_anew

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
