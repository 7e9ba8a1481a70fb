"""relative_depth = (layer - 0.5) / n_layers on every per-layer view, so models of different depths
compare on one axis."""

import duckdb
import polars as pl
import pytest

from dagster_project.compute.models import ModelSpec
from dagster_project.storage.model_rows import upsert_model
from dagster_project.storage.partition_writes import replace_partition
from dagster_project.storage.sql_files import view_definitions

SIX = ModelSpec("org--six", "org/six", "/x", "r1", "bert", 6, 1, True)
TWELVE = ModelSpec("org--twelve", "org/twelve", "/x", "r1", "bert", 12, 1, True)


def _summaries(n_layers: int) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "example_id": [0] * n_layers,
            "layer": list(range(1, n_layers + 1)),
            "head": [1] * n_layers,
            "n_tokens": [4] * n_layers,
            "entropy": [float(layer) for layer in range(1, n_layers + 1)],
        },
        schema_overrides={"layer": pl.Int16, "head": pl.Int16, "n_tokens": pl.Int16},
    )


def test_every_per_layer_view_has_relative_depth(conn: duckdb.DuckDBPyConnection) -> None:
    for view in view_definitions():
        if view.layer == "staging":
            continue
        columns = [row[0] for row in conn.execute(f"DESCRIBE {view.name}").fetchall()]
        if "layer" in columns:
            assert "relative_depth" in columns, view.name


def test_relative_depth_is_the_layer_centre_over_the_depth(conn: duckdb.DuckDBPyConnection) -> None:
    for spec in (SIX, TWELVE):
        upsert_model(conn, spec)
        replace_partition(conn, {"head_summaries": _summaries(spec.n_layers)}, spec.model_id, "demo")
    rows = conn.execute("SELECT model_id, layer, relative_depth FROM clark_entropy ORDER BY model_id, layer").fetchall()
    depths = {(model_id, layer): depth for model_id, layer, depth in rows}
    assert depths[("org--six", 1)] == pytest.approx(0.5 / 6)
    assert depths[("org--six", 6)] == pytest.approx(5.5 / 6)
    assert depths[("org--twelve", 12)] == pytest.approx(11.5 / 12)
    assert all(0 < depth < 1 for depth in depths.values())
    # the middle of either stack sits at 0.5: between layers 3 and 4 of six, 6 and 7 of twelve
    assert (depths[("org--six", 3)] + depths[("org--six", 4)]) / 2 == pytest.approx(0.5)
    assert (depths[("org--twelve", 6)] + depths[("org--twelve", 7)]) / 2 == pytest.approx(0.5)
