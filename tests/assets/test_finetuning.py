"""The fine-tuning and ablation assets, in process, on a tiny random BERT and a toy RTE."""

import json
from pathlib import Path

import duckdb
import polars as pl
import pytest
from dagster import DagsterInstance, materialize

from dagster_project.corpora import CORPORA, present_corpora
from dagster_project.defs.assets import (
    ablation_assets_by_task,
    corpus_assets_by_name,
    finetuned_assets_by_task,
    similarity_assets_by_task,
    warehouse_views,
)
from dagster_project.defs.assets.charts import chart_assets
from dagster_project.defs.jobs import ANALYSES, analysis_asset_keys
from dagster_project.defs.model_registry import drop_folders, scan_registry
from dagster_project.defs.registration import register_model
from dagster_project.defs.resources import DataDirectory
from dagster_project.presentation.chart_registry import CHARTS
from tests.runs import materialize_model
from tests.tiny_models import TINY_HEADS, TINY_LAYERS


def _toy_rte(folder: Path, split: str, n: int, overlong: int = 0) -> None:
    """n pairs; the last `overlong` have a first sentence of 150 words (over 128 pieces)."""
    words = ["good", "bad", "cat", "dog", "rain", "sun"]
    pl.DataFrame(
        {
            "sentence1": [f"the {words[i % 6]} is here ." * (30 if i >= n - overlong else 1) for i in range(n)],
            "sentence2": [f"a {words[(i * 5) % 6]} is there" for i in range(n)],
            "label": [i % 2 for i in range(n)],
            "idx": list(range(n)),
        }
    ).write_parquet(folder / f"rte_{split}.parquet")


def test_finetune_and_ablation_assets(tiny_model_dir: Path, tmp_path: Path, resources: dict):
    glue = tmp_path / "data" / "glue" / "hf_parquet"
    glue.mkdir(parents=True)
    _toy_rte(glue, "train", 24)
    _toy_rte(glue, "validation", 12, overlong=2)
    resources = {**resources, "data_dir": DataDirectory(path=str(tmp_path / "data"))}
    warehouse = resources["warehouse"]
    instance = DagsterInstance.ephemeral()
    base = register_model(str(tiny_model_dir), instance, warehouse).model_id
    assert materialize([warehouse_views], instance=instance, resources=resources).success
    ablation_charts = [
        chart
        for chart, spec in zip(chart_assets, CHARTS)
        if spec.view.startswith("kovaleva_") and "ablation" in spec.view
    ]
    assets = [
        corpus_assets_by_name["glue_rte_train"],
        corpus_assets_by_name["glue_rte"],
        finetuned_assets_by_task["rte"],
        ablation_assets_by_task["rte"],
        similarity_assets_by_task["rte"],
        *ablation_charts,
    ]
    run_config = {
        "ops": {
            "finetuned_rte": {
                "config": {"batch_size": 8, "max_steps": 2, "learning_rate": 1e-3, "precision": "bfloat16"}
            },
            "rte_ablation": {"config": {"batch_tokens": 64}},
        }
    }
    result = materialize_model(assets, base, instance, resources, run_config)
    checks = {
        (check.asset_key.to_user_string(), check.check_name): check.passed
        for check in result.get_asset_check_evaluations()
    }
    assert checks == {
        **{
            (f"{corpus}_examples", name): True
            for corpus in ("glue_rte_train", "glue_rte")
            for name in ("tokens_match_examples", "word_pieces_inside_example")
        },
        ("finetuned_rte", "scores_in_range"): True,
        ("rte_ablation", "scores_in_range"): True,
        ("rte_ablation", "ablation_settings_complete"): True,
        ("glue_rte_finetune_similarity", "cosines_in_range"): True,
        ("glue_rte_finetune_similarity", "rows_per_example"): True,
    }

    folder = tmp_path / "models_cache" / "finetuned" / f"{base}--rte"
    recipe = json.loads((folder / "recipe.json").read_text())
    assert (recipe["steps"], recipe["train_examples"], recipe["batch_size"]) == (2, 24, 8)
    assert (recipe["max_len"], recipe["overlong"], recipe["validation_overlong"]) == (128, "truncate", 2)
    assert recipe["precision"] == "bfloat16"
    metadata = result.asset_materializations_for_node("finetuned_rte")[0].metadata
    assert metadata["training_precision"].value == "bfloat16"
    # each fine-tuned setting saved its state after its last step; all are removed once every setting is scored
    assert not [*(tmp_path / "models_cache" / "training_state").glob("*")]
    with duckdb.connect(str(tmp_path / "warehouse.duckdb"), read_only=True) as conn:
        scores = conn.table("kovaleva_task_scores").pl().sort("setting")
        heads = conn.table("kovaleva_head_ablation").pl()
        layers = conn.table("kovaleva_layer_ablation").pl()
        baseline = conn.table("ablation_scores").filter("kind = 'baseline'").pl()
    assert scores["setting"].to_list() == ["pretrained", "pretrained_finetuned", "random_init_finetuned"]
    # the whole validation split, the 2 overlong pairs truncated, scored and in glue_rte_examples alike
    assert scores["metric"].unique().to_list() == ["accuracy"] and scores["n_examples"].unique().to_list() == [12]
    with duckdb.connect(str(tmp_path / "warehouse.duckdb"), read_only=True) as conn:
        assert conn.execute(
            "SELECT count(*), count(truncated_from) FROM examples WHERE corpus = 'glue_rte'"
        ).fetchone() == (12, 2)
    assert scores["paper_score"].to_list() == [52.7, 64.6, 52.7]
    assert scores["steps"].to_list() == [None, 2, 2]
    tuned = scores.filter(pl.col("setting") == "pretrained_finetuned")
    tuned_id = tuned["tuned_model_id"][0]
    assert tuned_id in instance.get_dynamic_partitions("models")  # attention analyses can run on it
    # the ablation baseline is the fine-tuned model's own validation score
    assert 100 * baseline["score"][0] == pytest.approx(tuned["score"][0])
    assert heads.height == TINY_LAYERS * TINY_HEADS and layers.height == TINY_LAYERS
    assert set(heads["tuned_model_id"]) == {tuned_id}
    assert (
        heads.select((pl.col("score") - pl.col("baseline_score") - pl.col("delta_vs_baseline")).abs().max()).item()
        < 1e-9
    )
    assert (tmp_path / "charts").is_dir()

    # The checkpoint registers with its own task's corpus (before: the default demo / wiki / xnli
    # corpora), and its Fig. 2 rows are drawn beside the base model's on glue_rte.
    scan = scan_registry(tmp_path / "absent.toml", drop_folders(), ANALYSES, CORPORA)
    (entry,) = scan.entries
    assert (entry.source, entry.analyses, entry.corpora) == (str(folder.resolve()), ("attention",), ("glue_rte",))
    keys = analysis_asset_keys(ANALYSES["attention"], entry.corpora, present_corpora(tmp_path / "data"))
    chosen = {key.to_user_string() for key in keys}
    assert "glue_rte_attention_facts" in chosen and not {"demo_examples", "wiki_segments_examples"} & chosen
    for model_id in (tuned_id, base):
        materialize_model(keys, model_id, instance, resources)
    shares_chart = next(spec for spec in CHARTS if spec.name == "kovaleva_fig2_pattern_shares")
    with duckdb.connect(str(tmp_path / "warehouse.duckdb"), read_only=True) as conn:
        corpus, shares = shares_chart.rows(conn, base)
    assert corpus == "glue_rte"
    totals = shares.group_by("model_id", "role").agg(pl.col("maps").sum())
    maps = 12 * TINY_LAYERS * TINY_HEADS  # the 12 validation pairs (2 truncated), every head
    assert {(row[0], row[1]): row[2] for row in totals.iter_rows()} == {
        (base, "pre-trained"): maps,
        (tuned_id, "fine-tuned"): maps,
    }

    # a run of one setting replaces its rows and keeps the others'
    again = {"ops": {"finetuned_rte": {"config": {"settings": ["pretrained"], "seed": 1}}}}
    materialize_model([finetuned_assets_by_task["rte"]], base, instance, resources, again)
    with duckdb.connect(str(tmp_path / "warehouse.duckdb"), read_only=True) as conn:
        rerun = conn.table("task_scores").pl().sort("setting")
    assert rerun["setting"].to_list() == ["pretrained", "pretrained_finetuned", "random_init_finetuned"]
    assert [json.loads(recipe)["seed"] for recipe in rerun["recipe"]] == [1, 0, 0]
    # the untrained setting records the precision asked for (the default, auto), the trained ones the one used
    assert [json.loads(recipe)["precision"] for recipe in rerun["recipe"]] == ["auto", "bfloat16", "bfloat16"]
