"""<corpus>_head_matches materialized for two tiny models with different tokenizers: nothing while the
model is alone with the corpus, every head pair once the other model has the corpus's examples."""

from pathlib import Path

import duckdb
import pytest
from dagster import AssetSelection, DagsterInstance, materialize

from dagster_project.defs.assets import all_assets, corpus_assets_by_name, encoder_model, warehouse_views
from dagster_project.defs.assets.compare.head_matching import head_match_assets_by_corpus
from dagster_project.defs.registration import register_model
from dagster_project.storage.batches import partition_rows
from dagster_project.storage.view_contracts import check_contracts
from tests.tiny_models import TINY_HEADS, TINY_LAYERS, tiny_family

HEADS = TINY_LAYERS * TINY_HEADS


def _materialize(instance: DagsterInstance, resources: dict, model_id: str, *assets) -> dict:
    names = {asset.key.path[-1] for asset in assets}
    config = {"demo_examples": {"config": {"size": 4}}, "demo_head_matches": {"config": {"max_examples": 3}}}
    result = materialize(
        all_assets,
        selection=AssetSelection.assets(*assets),
        partition_key=model_id,
        instance=instance,
        resources=resources,
        run_config={"ops": {name: value for name, value in config.items() if name in names}},
    )
    assert result.success
    return {check.check_name: check for check in result.get_asset_check_evaluations()}


def test_head_matches_of_two_models(tiny_model_dir: Path, resources: dict, tmp_path: Path) -> None:
    instance = DagsterInstance.ephemeral()
    assert materialize([warehouse_views], instance=instance, resources=resources).success
    bert = register_model(str(tiny_model_dir), instance, resources["warehouse"]).model_id
    mpnet = register_model(str(tiny_family("mpnet", tmp_path / "mpnet")), instance, resources["warehouse"]).model_id
    matches = head_match_assets_by_corpus["demo"]
    # Alone with the corpus: no rows, the check passes on nothing.
    checks = _materialize(instance, resources, bert, encoder_model, corpus_assets_by_name["demo"], matches)
    assert checks["distances_in_range"].passed and checks["distances_in_range"].metadata["rows"].value == 0

    _materialize(instance, resources, mpnet, encoder_model, corpus_assets_by_name["demo"])
    checks = _materialize(instance, resources, bert, matches)
    assert checks["distances_in_range"].passed
    conn = duckdb.connect(resources["warehouse"].database)
    rows = partition_rows(conn, "head_matches", bert, "demo")
    assert rows.height == HEADS * HEADS and set(rows["other_model_id"]) == {mpnet}
    assert set(rows["n_examples"]) == {3}
    assert rows["js_distance"].is_between(0, 0.8326).all()
    # The view reads the pair both ways: each model's heads get their nearest head in the other.
    for model_id, other in ((bert, mpnet), (mpnet, bert)):
        nearest = partition_rows(conn, "compare_head_matches", model_id, "demo")
        assert nearest.height == HEADS and set(nearest["other_model_id"]) == {other}
        assert (nearest["js_distance"] <= nearest["runner_up_distance"]).all()
    mirrored = partition_rows(conn, "compare_head_matches", mpnet, "demo").sort("layer", "head").row(0, named=True)
    expected = rows.filter((rows["other_layer"] == 1) & (rows["other_head"] == 1))["js_distance"].min()
    assert mirrored["js_distance"] == pytest.approx(expected)
    assert check_contracts(conn) == {}  # both directions: one nearest head per head, distances within sqrt(ln 2)
