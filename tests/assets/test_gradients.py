"""Gradient-importance asset (Clark Fig. 3): rows, view and chart on tiny random models."""

from pathlib import Path

import duckdb
from dagster import AssetSelection, DagsterInstance, materialize

from dagster_project.compute.clark.gradients import (
    MASKED_LM,
)
from dagster_project.defs.assets import all_assets, corpus_assets_by_name, encoder_model, warehouse_views
from dagster_project.defs.assets.charts import chart_assets_by_name
from dagster_project.defs.assets.clark.gradients import grad_importance
from dagster_project.defs.registration import register_model
from tests.tiny_models import TINY_LAYERS


def _materialize(model_dir: Path, resources: dict) -> tuple[dict, duckdb.DuckDBPyConnection, str]:
    instance = DagsterInstance.ephemeral()
    spec = register_model(str(model_dir), instance, resources["warehouse"])
    assert materialize([warehouse_views], instance=instance, resources=resources).success
    # The asset depends on wiki_segments_examples only, so the demo corpus goes first.
    corpus = AssetSelection.assets(encoder_model, corpus_assets_by_name["demo"])
    assert materialize(
        all_assets, selection=corpus, partition_key=spec.model_id, instance=instance, resources=resources
    ).success
    result = materialize(
        all_assets,
        selection=AssetSelection.assets(grad_importance, chart_assets_by_name["clark_fig3_grad_importance"]),
        partition_key=spec.model_id,
        instance=instance,
        resources=resources,
        run_config={"ops": {"grad_importance": {"config": {"corpus": "demo", "max_examples": 3}}}},
    )
    assert result.success
    metadata = {
        node: result.asset_materializations_for_node(node)[0].metadata
        for node in ("grad_importance", "clark_fig3_grad_importance")
    }
    return metadata, duckdb.connect(resources["warehouse"].database, read_only=True), spec.model_id


def test_asset_writes_no_rows_for_a_model_without_loss_head(tiny_model_dir: Path, resources: dict):
    materialized, conn, _ = _materialize(tiny_model_dir, resources)
    metadata = materialized["grad_importance"]
    assert metadata["grad_importance_rows"].value == 0
    assert "no loss head" in metadata["reason"].value
    assert conn.execute("SELECT count(*) FROM grad_importance").fetchone() == (0,)
    assert "no gradient rows" in materialized["clark_fig3_grad_importance"]["skipped"].value


def test_asset_view_and_chart_for_a_masked_lm(tiny_mlm_dir: Path, resources: dict):
    materialized, conn, model_id = _materialize(tiny_mlm_dir, resources)
    metadata = materialized["grad_importance"]
    assert Path(materialized["clark_fig3_grad_importance"]["png"].value).stat().st_size > 0
    assert metadata["grad_importance_rows"].value > 0 and metadata["loss_name"].value == MASKED_LM
    view = conn.execute(
        "SELECT layer, target_type, grad_magnitude, loss_name, n_examples FROM clark_grad_importance "
        "WHERE model_id = ? ORDER BY ALL",
        [model_id],
    ).fetchall()
    assert len(view) == TINY_LAYERS * 3 and all(row[2] > 0 and row[3] == MASKED_LM and row[4] == 3 for row in view)
