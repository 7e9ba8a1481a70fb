"""clark_head_distances and clark_head_mds on hand-built fixture rows."""

import duckdb
import polars as pl

from dagster_project.compute.models import ModelSpec
from dagster_project.storage.batches import partition_rows
from dagster_project.storage.model_rows import upsert_model
from dagster_project.storage.partition_writes import replace_partition

SPEC = ModelSpec("org--m", "org/m", "/x", "r1", "bert", 2, 1, True)


def test_head_distances_view_has_both_orders_and_the_mean_per_token(conn: duckdb.DuckDBPyConnection) -> None:
    upsert_model(conn, SPEC)
    distances = pl.DataFrame(
        {
            "layer_a": [1, 1, 2],
            "head_a": [1, 1, 1],
            "layer_b": [2, 2, 1],
            "head_b": [1, 2, 1],
            "js_sum": [6.0, 3.0, 6.0],
            "tokens": [4, 4, 4],
        }
    )  # (1,1)-(2,1) is stored in both orders: the view keeps one row per order
    replace_partition(conn, {"head_distances": distances}, "org--m", "wiki_segments")
    rows = partition_rows(conn, "clark_head_distances", "org--m", "wiki_segments").sort(
        "layer_a", "head_a", "layer_b", "head_b"
    )
    assert rows.select("model", "layer_a", "head_a", "layer_b", "head_b", "js", "js_sum", "tokens").rows() == [
        ("org/m", 1, 1, 2, 1, 1.5, 6.0, 4),
        ("org/m", 1, 1, 2, 2, 0.75, 3.0, 4),
        ("org/m", 2, 1, 1, 1, 1.5, 6.0, 4),
        ("org/m", 2, 2, 1, 1, 0.75, 3.0, 4),
    ]


def test_head_mds_view_names_the_model(conn: duckdb.DuckDBPyConnection) -> None:
    upsert_model(conn, SPEC)
    embedding = pl.DataFrame(
        {"layer": [1, 2], "head": [1, 1], "x": [-0.5, 0.5], "y": [0.0, 0.25], "stress": [0.01, 0.01]}
    )
    replace_partition(conn, {"head_mds": embedding}, "org--m", "wiki_segments")
    replace_partition(conn, {"head_mds": embedding.head(1)}, "org--m", "demo")
    rows = partition_rows(conn, "clark_head_mds", "org--m", "wiki_segments").sort("layer")
    assert rows.select("model", "layer", "head", "x", "y", "stress").rows() == [
        ("org/m", 1, 1, -0.5, 0.0, 0.01),
        ("org/m", 2, 1, 0.5, 0.25, 0.01),
    ]
    assert partition_rows(conn, "clark_head_mds", "org--m")["corpus"].sort().to_list() == [
        "demo",
        "wiki_segments",
        "wiki_segments",
    ]


def test_head_mds_is_coloured_by_each_heads_behaviour(conn: duckdb.DuckDBPyConnection) -> None:
    """Five heads of 4-token examples (uniform entropy ln 4 = 1.386): one per §3 behaviour."""
    spec = ModelSpec("org--b", "org/b", "/x", "r1", "bert", 1, 5, True)
    upsert_model(conn, spec)
    # head: to_prev, to_next, to_cls, to_sep, entropy
    values = {
        1: (0.6, 0.1, 0.2, 0.1, 0.5),  # previous (0.6 > 0.5)
        2: (0.1, 0.55, 0.3, 0.0, 0.5),  # next
        3: (0.1, 0.1, 0.3, 0.25, 0.5),  # [CLS]/[SEP]: 0.55 together
        4: (0.2, 0.2, 0.2, 0.2, 1.1),  # broad: 1.1 >= 0.75 * ln 4 = 1.04
        5: (0.2, 0.2, 0.2, 0.2, 1.0),  # other: 1.0 < 1.04
    }
    summaries = pl.DataFrame(
        [
            {
                "example_id": 0,
                "layer": 1,
                "head": head,
                "n_tokens": 4,
                "to_prev": prev,
                "to_next": nxt,
                "to_cls": cls,
                "to_sep": sep,
                "to_self": 0.0,
                "to_punct": 0.0,
                "sep_to_sep": 0.0,
                "entropy": entropy,
                "cls_entropy": entropy,
                "pattern": "heterogeneous",
            }
            for head, (prev, nxt, cls, sep, entropy) in values.items()
        ]
    )
    embedding = pl.DataFrame({"layer": [1] * 5, "head": list(range(1, 6)), "x": [0.0] * 5, "y": [0.0] * 5})
    replace_partition(conn, {"head_summaries": summaries}, "org--b", "wiki_segments")
    replace_partition(conn, {"head_mds": embedding.with_columns(stress=pl.lit(0.1))}, "org--b", "wiki_segments")
    rows = partition_rows(conn, "clark_head_mds", "org--b").sort("head")
    assert rows["behaviour"].to_list() == ["previous", "next", "[CLS]/[SEP]", "broad", "other"]
