"""Weighting-faithfulness asset (GlobEnc §5): rows and view on a tiny classifier, none for a model without one."""

from pathlib import Path

import duckdb
from dagster import AssetSelection, DagsterInstance, materialize

from dagster_project.compute.weightings import WEIGHTINGS
from dagster_project.defs.assets import all_assets, corpus_assets_by_name, encoder_model, warehouse_views
from dagster_project.defs.assets.compare.faithfulness import weighting_faithfulness_asset
from dagster_project.defs.registration import register_model

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
    assert metadata["saliency_correlations_rows"].value == N_EXAMPLES * len(WEIGHTINGS)
    view = conn.execute(
        "SELECT weighting, mean_spearman, ci_low, ci_high, n_examples FROM compare_weightings_faithfulness "
        "WHERE model_id = ? AND corpus = 'demo' ORDER BY weighting",
        [model_id],
    ).fetchall()
    assert [row[0] for row in view] == sorted(WEIGHTINGS)
    for weighting, mean, low, high, n_examples in view:
        assert n_examples == N_EXAMPLES and -1 <= low <= high <= 1 and -1 <= mean <= 1, weighting
