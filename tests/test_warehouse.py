"""Warehouse writes and the SQL views, on fixture tables with hand-computed answers."""

import duckdb
import polars as pl
import pytest

from dagster_project.compute.models import ModelSpec
from dagster_project.storage.warehouse import (
    VIEW_LAYERS,
    apply_views,
    partition_rows,
    replace_partition,
    upsert_model,
    view_files,
)

SPEC = ModelSpec("org--m", "org/m", "/x", "r1", "bert", 1, 2, True)


def _summaries(example_id: int, n_tokens: int, to_cls: float, entropy: float) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "example_id": [example_id, example_id],
            "layer": [1, 1],
            "head": [1, 2],
            "n_tokens": [n_tokens, n_tokens],
            "to_cls": [to_cls, 0.0],
            "to_sep": [0.5, 0.5],
            "to_prev": [1.0, 0.0],
            "entropy": [entropy, 0.0],
            "cls_entropy": [entropy, 0.0],
        }
    )


def _histogram(sums: list[float], counts: list[int], head: int = 1, kind: str = "attention") -> pl.DataFrame:
    return pl.DataFrame(
        {
            "example_id": [0] * 3,
            "kind": [kind] * 3,
            "scope": ["all"] * 3,
            "layer": [1] * 3,
            "head": [head] * 3,
            "offset": [-1, 0, 1],
            "weight_sum": sums,
            "pair_count": counts,
        }
    )


def test_views_are_ordered_by_dependency():
    names = [path.stem for path in view_files()]
    assert (
        names.index("position_profiles") < names.index("head_centers_of_mass") < names.index("pascual_center_of_mass")
    )
    assert {path.parent.name for path in view_files()} == set(VIEW_LAYERS)


def test_every_view_selects_on_an_empty_warehouse(conn: duckdb.DuckDBPyConnection):
    for path in view_files():
        assert conn.execute(f"SELECT count(*) FROM {path.stem}").fetchone() == (0,)
    assert apply_views(conn) == [path.stem for path in view_files()]  # idempotent


def test_head_means_weight_rows_by_tokens(conn):
    upsert_model(conn, SPEC)
    frame = pl.concat([_summaries(0, 10, 0.2, 1.0), _summaries(1, 30, 0.6, 2.0)])
    replace_partition(conn, {"head_summaries": frame}, "org--m", "demo")
    row = conn.execute(
        "SELECT model, to_cls, to_prev, entropy, cls_entropy, uniform_entropy, n_examples "
        "FROM clark_entropy JOIN clark_special_tokens USING (model, model_id, corpus, layer, head, n_examples) "
        "JOIN clark_relative_position USING (model, model_id, corpus, layer, head, n_examples) WHERE head = 1"
    ).fetchone()
    model, to_cls, to_prev, entropy, cls_entropy, uniform, n_examples = row
    assert model == "org/m" and n_examples == 2
    assert to_cls == pytest.approx((10 * 0.2 + 30 * 0.6) / 40)
    assert entropy == pytest.approx((10 * 1.0 + 30 * 2.0) / 40)
    assert cls_entropy == pytest.approx(1.5)
    assert uniform == pytest.approx((10 * 2.302585 + 30 * 3.401197) / 40, rel=1e-6)
    assert to_prev == pytest.approx(1.0)
    assert conn.execute("SELECT count(*) FROM clark_relative_position WHERE mostly_previous").fetchone() == (1,)


def test_histogram_views_normalize_by_pairs(conn):
    upsert_model(conn, SPEC)
    frame = pl.concat([_histogram([2.0, 1.0, 1.0], [2, 4, 2]), _histogram([0.0, 0.0, 3.0], [2, 4, 2], head=2)])
    replace_partition(conn, {"position_histograms": frame}, "org--m", "xnli_en")
    rows = partition_rows(conn, "pascual_attention_histograms", "org--m", "xnli_en").sort("head", "offset")
    assert rows["value"].to_list()[:3] == pytest.approx([1.0, 0.25, 0.5])
    assert rows["value_max_normalized"].to_list()[:3] == pytest.approx([1.0, 0.25, 0.5])
    assert rows["value_max_normalized"].to_list()[3:] == pytest.approx([0.0, 0.0, 1.0])
    (center,) = conn.execute("SELECT center_of_mass FROM pascual_center_of_mass").fetchone()
    # head 1: (-1 * 1 + 1 * 0.5) / 1.75; head 2: +1; the layer is their mean.
    assert center == pytest.approx((-0.5 / 1.75 + 1.0) / 2)


def test_replacing_a_partition_never_duplicates(conn):
    frame = _summaries(0, 10, 0.2, 1.0)
    replace_partition(conn, {"head_summaries": frame}, "org--m", "demo")
    replace_partition(conn, {"head_summaries": frame}, "org--m", "demo")
    replace_partition(conn, {"head_summaries": frame}, "org--m", "other")
    counts = conn.execute("SELECT corpus, count(*) FROM head_summaries GROUP BY corpus ORDER BY corpus").fetchall()
    assert counts == [("demo", 2), ("other", 2)]


def test_an_empty_frame_clears_the_partition_of_its_table(conn):
    replace_partition(conn, {"head_summaries": _summaries(0, 10, 0.2, 1.0)}, "org--m", "demo")
    replace_partition(conn, {"head_summaries": _summaries(0, 10, 0.2, 1.0)}, "org--m", "other")
    replace_partition(conn, {"head_summaries": pl.DataFrame()}, "org--m", "demo")
    assert conn.execute("SELECT corpus, count(*) FROM head_summaries GROUP BY corpus").fetchall() == [("other", 2)]


def test_a_failed_write_leaves_the_partition_untouched(conn):
    replace_partition(conn, {"head_summaries": _summaries(0, 10, 0.2, 1.0)}, "org--m", "demo")
    broken = pl.DataFrame({"example_id": [1], "not_a_column": [1.0]})
    with pytest.raises(duckdb.Error):
        replace_partition(
            conn, {"head_summaries": _summaries(5, 12, 0.3, 1.0), "position_histograms": broken}, "org--m", "demo"
        )
    assert conn.execute("SELECT list(DISTINCT example_id) FROM head_summaries").fetchone() == ([0],)


def test_unknown_tables_are_refused(conn):
    with pytest.raises(ValueError, match="not a partitioned warehouse table"):
        replace_partition(conn, {"models": pl.DataFrame({"x": [1]})}, "org--m", "demo")
