"""Base vs fine-tuned attention cosine (Kovaleva Fig. 5) on tiny random BERTs."""

import copy
from pathlib import Path

import polars as pl
import pytest
import torch

from dagster_project.defs.assets.kovaleva import tuned_model_for
from dagster_project.compute.finetune_similarity import extract_finetune_cosines
from dagster_project.storage.warehouse import replace_partition
from tests.conftest import TINY_HEADS, TINY_LAYERS


def test_identical_models_have_cosine_one(encoder, demo_tokens):
    cosines, _ = extract_finetune_cosines(encoder, encoder, demo_tokens, batch_tokens=256)
    assert cosines.height == 12 * TINY_LAYERS * TINY_HEADS
    assert (cosines["cosine"] - 1).abs().max() < 1e-5


def test_only_the_changed_layer_moves(encoder, demo_tokens):
    tuned = copy.deepcopy(encoder)
    with torch.no_grad():
        # Zero queries in layer 2: every row of its maps becomes uniform 1/n.
        attention = tuned.model.encoder.layer[1].attention.self
        attention.query.weight.zero_()
        attention.query.bias.zero_()
    cosines, _ = extract_finetune_cosines(encoder, tuned, demo_tokens)
    assert (cosines.filter(pl.col("layer") == 1)["cosine"] - 1).abs().max() < 1e-5
    # cosine with a uniform map = sum of the map / (n * ||map||) for every example and head
    example = int(demo_tokens["example_id"].min())
    rows = demo_tokens.filter(pl.col("example_id") == example).sort("position")
    with torch.inference_mode():
        maps = encoder.model(
            input_ids=torch.tensor([rows["token_id"].to_list()]),
            token_type_ids=torch.tensor([rows["segment"].to_list()]),
            output_attentions=True,
        ).attentions[1][0]
    n = rows.height
    expected = maps.sum((-2, -1)) / (n * maps.square().sum((-2, -1)).sqrt())
    got = cosines.filter((pl.col("example_id") == example) & (pl.col("layer") == 2)).sort("head")["cosine"].to_numpy()
    assert torch.allclose(torch.tensor(got), expected, atol=1e-5)


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

    from dagster_project.defs.assets.kovaleva import similarity_assets_by_task

    instance = DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("models", ["base"])
    with pytest.raises(Exception, match="Materialize finetuned_rte for partition 'base' first"):
        materialize(
            [similarity_assets_by_task["rte"]],
            partition_key="base",
            instance=instance,
            resources={"warehouse": DuckDBResource(database=str(tmp_path / "warehouse.duckdb"))},
        )
