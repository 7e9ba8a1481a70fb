"""Weighting-faithfulness asset (GlobEnc §5): rows and view on a tiny classifier, none for a model without one,
and rows for the checkpoint the SST-2 fine-tuning saves, in the run its registry entry plans."""

from pathlib import Path

import duckdb
import polars as pl
from dagster import AssetSelection, DagsterInstance, materialize

from dagster_project.compute.kovaleva.finetuning import finetuned_checkpoint_dir
from dagster_project.compute.weightings import AGGREGATIONS, WEIGHTINGS
from dagster_project.corpora import CORPORA, present_corpora
from dagster_project.defs.assets import (
    all_assets,
    corpus_assets_by_name,
    encoder_model,
    finetuned_assets_by_task,
    warehouse_views,
)
from dagster_project.defs.assets.compare.faithfulness import weighting_faithfulness_asset
from dagster_project.defs.jobs import ANALYSES, analysis_asset_keys
from dagster_project.defs.model_registry import checkpoint_entry
from dagster_project.defs.registration import register_model
from dagster_project.defs.resources import DataDirectory
from tests.runs import materialize_model, toy_sst2

N_EXAMPLES = 3


def _materialize(model_dir: Path, resources: dict) -> tuple[dict, duckdb.DuckDBPyConnection, str]:
    instance = DagsterInstance.ephemeral()
    spec = register_model(str(model_dir), instance, resources["warehouse"])
    assert materialize([warehouse_views], instance=instance, resources=resources).success
    corpus = AssetSelection.assets(encoder_model, corpus_assets_by_name["demo"])
    assert materialize(
        all_assets, selection=corpus, partition_key=spec.model_id, instance=instance, resources=resources
    ).success
    result = materialize(
        all_assets,
        selection=AssetSelection.assets(weighting_faithfulness_asset),
        partition_key=spec.model_id,
        instance=instance,
        resources=resources,
        run_config={"ops": {"weighting_faithfulness": {"config": {"corpus": "demo", "max_examples": N_EXAMPLES}}}},
    )
    assert result.success
    metadata = result.asset_materializations_for_node("weighting_faithfulness")[0].metadata
    return metadata, duckdb.connect(resources["warehouse"].database, read_only=True), spec.model_id


def test_asset_writes_no_rows_for_a_model_without_a_classifier(tiny_model_dir: Path, resources: dict) -> None:
    metadata, conn, _ = _materialize(tiny_model_dir, resources)
    assert metadata["saliency_correlations_rows"].value == 0
    assert "no loss head" in metadata["reason"].value
    assert conn.execute("SELECT count(*) FROM saliency_correlations").fetchone() == (0,)


def test_asset_and_view_for_a_classifier(tiny_classifier_dir: Path, resources: dict) -> None:
    metadata, conn, model_id = _materialize(tiny_classifier_dir, resources)
    assert metadata["saliency_correlations_rows"].value == N_EXAMPLES * len(WEIGHTINGS) * len(AGGREGATIONS)
    view = conn.execute(
        "SELECT aggregation, weighting, mean_spearman, ci_low, ci_high, n_examples "
        "FROM compare_weightings_faithfulness WHERE model_id = ? AND corpus = 'demo' ORDER BY aggregation, weighting",
        [model_id],
    ).fetchall()
    assert [row[:2] for row in view] == [(a, w) for a in AGGREGATIONS for w in sorted(WEIGHTINGS)]
    for aggregation, weighting, mean, low, high, n_examples in view:
        assert n_examples == N_EXAMPLES and -1 <= low <= high <= 1 and -1 <= mean <= 1, (aggregation, weighting)


def test_the_sst2_checkpoint_gets_rows_in_the_run_its_entry_plans(
    tiny_model_dir: Path, tmp_path: Path, resources: dict
) -> None:
    toy_sst2(tmp_path / "data")
    resources = {**resources, "data_dir": DataDirectory(path=str(tmp_path / "data"))}
    instance = DagsterInstance.ephemeral()
    base = register_model(str(tiny_model_dir), instance, resources["warehouse"]).model_id
    assert materialize([warehouse_views], instance=instance, resources=resources).success
    tuning = {"settings": ["pretrained_finetuned"], "batch_size": 8, "max_steps": 2, "learning_rate": 1e-3}
    materialize_model(
        [
            corpus_assets_by_name["glue_sst2_train"],
            corpus_assets_by_name["glue_sst2"],
            finetuned_assets_by_task["sst2"],
        ],
        base,
        instance,
        resources,
        {"ops": {"finetuned_sst2": {"config": tuning}}},
    )
    # the checkpoint's own run: its entry (recipe.json) names attention on glue_sst2, which holds the faithfulness
    entry = checkpoint_entry(finetuned_checkpoint_dir(base, "sst2"), ANALYSES, CORPORA)
    present = present_corpora(tmp_path / "data")
    planned = {key for name in entry.analyses for key in analysis_asset_keys(ANALYSES[name], entry.corpora, present)}
    assert weighting_faithfulness_asset.key in planned
    with duckdb.connect(resources["warehouse"].database, read_only=True) as conn:
        (tuned,) = conn.execute("SELECT tuned_model_id FROM task_scores WHERE tuned_model_id IS NOT NULL").fetchone()
    result = materialize_model(
        [encoder_model, corpus_assets_by_name["glue_sst2"], weighting_faithfulness_asset], tuned, instance, resources
    )
    metadata = result.asset_materializations_for_node("weighting_faithfulness")[0].metadata
    assert metadata["saliency_correlations_rows"].value == 6 * len(WEIGHTINGS) * len(AGGREGATIONS)  # 6 sentences
    (check,) = [check for check in result.get_asset_check_evaluations() if check.check_name == "correlations_in_range"]
    assert check.passed and check.metadata["expected_rows"].value == 6 * len(WEIGHTINGS) * len(AGGREGATIONS)
    with duckdb.connect(resources["warehouse"].database, read_only=True) as conn:
        # the claims read the checkpoint's rows through its base model (int_finetuned_models)
        rows = conn.execute(
            "SELECT t.base_model_id, f.aggregation, f.weighting, f.n_examples FROM compare_weightings_faithfulness f "
            "JOIN int_finetuned_models t ON t.tuned_model_id = f.model_id AND t.corpus = f.corpus "
            "WHERE f.corpus = 'glue_sst2'"
        ).pl()
    assert set(rows["base_model_id"]) == {base} and set(rows["n_examples"]) == {6}
    assert rows.select("aggregation", "weighting").sort(pl.all()).rows() == [
        (a, w) for a in AGGREGATIONS for w in sorted(WEIGHTINGS)
    ]
