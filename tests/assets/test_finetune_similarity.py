"""Fine-tune similarity asset (Kovaleva Fig. 5): the tuned model it compares with."""

from pathlib import Path

import polars as pl
import pytest

from dagster_project.defs.assets.kovaleva.similarity import tuned_model_for
from dagster_project.storage.partition_writes import replace_partition


def test_tuned_model_comes_from_task_scores(conn):
    assert tuned_model_for(conn, "base", "rte") is None
    scores = pl.DataFrame(
        {
            "task": ["rte"] * 3,
            "setting": ["pretrained", "random_init_finetuned", "pretrained_finetuned"],
            "metric": ["accuracy"] * 3,
            "score": [0.5, 0.5, 0.6],
            "n_examples": [10] * 3,
            "tuned_model_id": [None, None, "base--rte"],
            "recipe": ["{}"] * 3,
            "seconds": [1.0] * 3,
        }
    )
    replace_partition(conn, {"task_scores": scores}, "base", "glue_rte")
    assert tuned_model_for(conn, "base", "rte") == "base--rte"
    assert tuned_model_for(conn, "base", "mrpc") is None


def test_asset_without_a_finetuned_model_names_the_finetuning_asset(tmp_path: Path):
    from dagster import DagsterInstance, materialize
    from dagster_duckdb import DuckDBResource

    from dagster_project.defs.assets.kovaleva.similarity import similarity_assets_by_task
    from dagster_project.defs.resources import ComputeResource

    instance = DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("models", ["base"])
    with pytest.raises(Exception, match="Materialize finetuned_rte for partition 'base' first"):
        materialize(
            [similarity_assets_by_task["rte"]],
            partition_key="base",
            instance=instance,
            resources={
                "warehouse": DuckDBResource(database=str(tmp_path / "warehouse.duckdb")),
                "compute": ComputeResource(),
            },
        )
