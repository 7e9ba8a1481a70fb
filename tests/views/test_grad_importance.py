"""The clark_grad_importance view on hand-made gradient rows."""

from pathlib import Path

import duckdb
import polars as pl
import pytest

from dagster_project.compute.clark.gradients import (
    MASKED_LM,
)
from dagster_project.storage.model_rows import upsert_model
from dagster_project.storage.partition_writes import replace_partition


def test_view_averages_per_example_means(conn: duckdb.DuckDBPyConnection, tiny_model_dir: Path):
    from dagster_project.compute.models import inspect_model

    spec = inspect_model(str(tiny_model_dir))
    upsert_model(conn, spec)
    rows = pl.DataFrame(
        {
            "example_id": [0, 0, 1, 0],
            "layer": [1, 1, 1, 2],
            "head": [1, 2, 1, 1],
            "target_type": ["sep", "sep", "sep", "other"],
            "grad_sum": [1.0, 2.0, 6.0, 0.5],
            "weight_count": [10, 10, 10, 5],
            "loss_name": MASKED_LM,
            "mask_probability": 0.15,
            "seed": 0,
        }
    )
    replace_partition(conn, {"grad_importance": rows}, spec.model_id, "demo")
    view = conn.execute(
        "SELECT model, layer, target_type, grad_magnitude, n_examples, n_weights "
        "FROM clark_grad_importance ORDER BY layer"
    ).fetchall()
    # Layer 1 [SEP]: example 0's mean (1 + 2) / (10 + 10) = 0.15, example 1's 6 / 10 = 0.6; their
    # mean 0.375 (pooling every weight would give 9 / 30 = 0.3); layer 2 other: 0.5 / 5.
    assert view == [
        (str(tiny_model_dir), 1, "sep", pytest.approx(0.375), 2, 30),
        (str(tiny_model_dir), 2, "other", pytest.approx(0.1), 1, 5),
    ]
