"""Head-MDS asset (Clark Fig. 6) on hand-made head distances."""

from pathlib import Path

import numpy as np
import pytest
import torch
from dagster import DagsterInstance, ExecuteInProcessResult, materialize
from dagster_duckdb import DuckDBResource
from scipy.spatial.distance import pdist, squareform

from dagster_project.compute.clark.head_clustering import distance_rows
from dagster_project.compute.models import ModelSpec
from dagster_project.defs.assets.clark.head_clustering import head_mds
from dagster_project.storage.batches import partition_rows
from dagster_project.storage.model_rows import upsert_model
from dagster_project.storage.partition_writes import replace_partition
from dagster_project.storage.views import apply_views


@pytest.fixture
def warehouse(tmp_path: Path) -> DuckDBResource:
    """A warehouse file with every table and view, as warehouse_views leaves it."""
    resource = DuckDBResource(database=str(tmp_path / "warehouse.duckdb"))
    with resource.get_connection() as conn:
        apply_views(conn)
    return resource


def _materialize_head_mds(
    warehouse: DuckDBResource, model_id: str, config: dict | None = None
) -> ExecuteInProcessResult:
    instance = DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("models", [model_id])
    return materialize(
        [head_mds],
        partition_key=model_id,
        instance=instance,
        resources={"warehouse": warehouse},
        run_config={"ops": {"head_mds": {"config": config or {}}}},
    )


# 2 layers x 2 heads at the corners of a 3 x 4 rectangle; js_sum = distance * tokens.
CORNERS = np.array([[0.0, 0.0], [3.0, 0.0], [0.0, 4.0], [3.0, 4.0]])


def _corner_distances(warehouse: DuckDBResource) -> None:
    js_sums = torch.from_numpy(squareform(pdist(CORNERS)) * 10)
    with warehouse.get_connection() as conn:
        replace_partition(
            conn, {"head_distances": distance_rows(js_sums, tokens=10, heads=2)}, "org--m", "wiki_segments"
        )
        upsert_model(
            conn, ModelSpec("org--m", "org/m", "/m", "r", "bert", n_layers=2, n_heads=2, takes_token_types=True)
        )


def test_head_mds_asset_embeds_the_heads_at_their_distances(warehouse: DuckDBResource) -> None:
    _corner_distances(warehouse)
    result = _materialize_head_mds(warehouse, "org--m")
    assert result.success
    with warehouse.get_connection() as conn:
        rows = partition_rows(conn, "head_mds", "org--m", "wiki_segments").sort("layer", "head")
    assert rows.select("layer", "head").rows() == [(1, 1), (1, 2), (2, 1), (2, 2)]
    # Kruskal's non-metric MDS by default: the rectangle up to scale, recorded as such
    ratios = pdist(rows.select("x", "y").to_numpy()) / pdist(CORNERS)
    np.testing.assert_allclose(ratios, ratios[0], rtol=1e-6)
    assert rows["stress"].max() < 1e-6
    assert rows["metric_mds"].to_list() == [False] * 4
    assert result.asset_materializations_for_node("head_mds")[0].metadata["metric_mds"].value is False


def test_head_mds_asset_metric_option_keeps_the_distances(warehouse: DuckDBResource) -> None:
    _corner_distances(warehouse)
    result = _materialize_head_mds(warehouse, "org--m", {"metric_mds": True})
    with warehouse.get_connection() as conn:
        rows = partition_rows(conn, "head_mds", "org--m", "wiki_segments").sort("layer", "head")
    np.testing.assert_allclose(pdist(rows.select("x", "y").to_numpy()), pdist(CORNERS), atol=1e-6)
    assert rows["metric_mds"].to_list() == [True] * 4
    assert result.asset_materializations_for_node("head_mds")[0].metadata["metric_mds"].value is True


def test_head_mds_asset_without_distances_says_what_to_materialize(warehouse: DuckDBResource) -> None:
    with pytest.raises(ValueError, match="materialize wiki_segments_attention_facts for this model first"):
        _materialize_head_mds(warehouse, "org--m")
