"""compare_head_matches on hand-built head_matches rows: each head's nearest head in the other model,
in both directions from one stored direction, with both heads' relative depth."""

import duckdb
import polars as pl
import pytest

from dagster_project.compute.models import ModelSpec
from dagster_project.storage.batches import partition_rows
from dagster_project.storage.model_rows import upsert_model
from dagster_project.storage.partition_writes import replace_partition

SMALL = ModelSpec("org--small", "org/small", "/x", "r1", "bert", 2, 1, True)  # 2 layers x 1 head
BIG = ModelSpec("local--big", "/models/big", "/models/big", "r1", "mpnet", 4, 1, False)  # 4 layers x 1 head

# js_distance[small layer][big layer]: small 1 is nearest big 2 (runner-up 0.3), small 2 nearest big 4.
DISTANCES = [[0.3, 0.1, 0.5, 0.6], [0.6, 0.4, 0.35, 0.2]]


def _matches() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "other_model_id": ["local--big"] * 8,
            "layer": [layer for layer in (1, 2) for _ in range(4)],
            "head": [1] * 8,
            "other_layer": [other for _ in (1, 2) for other in (1, 2, 3, 4)],
            "other_head": [1] * 8,
            "js_distance": [value for row in DISTANCES for value in row],
            "n_examples": [3] * 8,
            "n_words": [40] * 8,
        }
    )


def test_nearest_head_in_both_directions_with_relative_depth(conn: duckdb.DuckDBPyConnection) -> None:
    for spec in (SMALL, BIG):
        upsert_model(conn, spec)
    replace_partition(conn, {"head_matches": _matches()}, "org--small", "demo")
    columns = ("layer", "other_model", "other_layer", "js_distance", "runner_up_distance", "relative_depth")
    small = partition_rows(conn, "compare_head_matches", "org--small", "demo").sort("layer").select(*columns)
    assert small.rows() == [
        (1, "/models/big", 2, 0.1, 0.3, 0.25),
        (2, "/models/big", 4, 0.2, 0.35, 0.75),
    ]
    # The big model's heads, read from the small model's rows (the distance is symmetric).
    big = partition_rows(conn, "compare_head_matches", "local--big", "demo").sort("layer")
    assert big.select("layer", "other_model", "other_layer", "js_distance", "other_relative_depth").rows() == [
        (1, "org/small", 1, 0.3, 0.25),
        (2, "org/small", 1, 0.1, 0.25),
        (3, "org/small", 2, 0.35, 0.75),
        (4, "org/small", 2, 0.2, 0.75),
    ]
    assert big["relative_depth"].to_list() == pytest.approx([0.125, 0.375, 0.625, 0.875])
    assert big["runner_up_distance"].to_list() == pytest.approx([0.6, 0.4, 0.5, 0.6])


def test_a_direction_stored_by_both_models_is_not_doubled(conn: duckdb.DuckDBPyConnection) -> None:
    for spec in (SMALL, BIG):
        upsert_model(conn, spec)
    replace_partition(conn, {"head_matches": _matches()}, "org--small", "demo")
    # The big model's own run stored its direction too, with other values: those are the ones shown.
    mirrored = _matches().select(
        other_model_id=pl.lit("org--small"),
        layer="other_layer",
        head="other_head",
        other_layer="layer",
        other_head="head",
        js_distance=pl.col("js_distance") + 0.01,
        n_examples="n_examples",
        n_words="n_words",
    )
    replace_partition(conn, {"head_matches": mirrored}, "local--big", "demo")
    big = partition_rows(conn, "compare_head_matches", "local--big", "demo").sort("layer")
    assert big.height == 4
    assert big["js_distance"].to_list() == pytest.approx([0.31, 0.11, 0.36, 0.21])
    assert partition_rows(conn, "compare_head_matches", "org--small", "demo").height == 2
