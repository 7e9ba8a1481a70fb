"""Pascual views over the HTA example maps (Fig. 7 / Appendix C), the HTA correlations and the
per-language centers of mass (Fig. 4) on hand-built fixture rows."""

import dataclasses

import duckdb
import polars as pl
import pytest

from dagster_project.compute.models import ModelSpec
from dagster_project.storage.batches import partition_rows
from dagster_project.storage.model_rows import upsert_model
from dagster_project.storage.partition_writes import replace_partition

SPEC = ModelSpec("org--m", "org/m", "/x", "r1", "bert", 1, 2, True)


def test_example_maps_in_long_form_and_one_pattern_head_per_class(conn: duckdb.DuckDBPyConnection) -> None:
    """Example 0 ([CLS] hi [SEP]) kept for 'vertical': head 1-2 is vertical there, head 1-1 not."""
    upsert_model(conn, SPEC)
    cells = [(q, k) for q in range(3) for k in range(3)]
    maps = pl.DataFrame(
        [
            {
                "example_id": 0,
                "pattern": "vertical",
                "layer": 1,
                "head": head,
                "query": q,
                "key": k,
                "attention": float(k == 0) if head == 2 else 1 / 3,
                "previous_layer": 0.5 if k == q else 0.25,
                "input": 0.2 + 0.1 * k,
                "hta_method": "exact",
            }
            for head in (1, 2)
            for q, k in cells
        ]
    )
    tokens = pl.DataFrame(
        {
            "example_id": [0, 0, 0],
            "position": [0, 1, 2],
            "token_id": [101, 7632, 102],
            "token": ["[CLS]", "hi", "[SEP]"],
            "token_class": ["cls", "other", "sep"],
            "is_special": [True, False, True],
            "segment": [0, 0, 0],
        }
    )
    summaries = pl.DataFrame(
        {"example_id": [0, 0], "layer": [1, 1], "head": [1, 2], "n_tokens": [3, 3]},
    ).with_columns(pattern=pl.Series(["heterogeneous", "vertical"]))
    replace_partition(
        conn, {"tokens": tokens, "head_summaries": summaries, "hta_example_maps": maps}, "org--m", "xnli_en"
    )
    rows = partition_rows(conn, "pascual_hta_example_maps", "org--m")
    assert rows.height == 2 * 9 * 3  # heads x cells x (attention, previous_layer, input)
    cell = rows.filter(pl.col("head") == 2, pl.col("query") == 1, pl.col("key") == 0).sort("map")
    assert cell.select("map", "query_token", "key_token", "pattern_head").rows() == [
        ("attention", "hi", "[CLS]", True),
        ("input", "hi", "[CLS]", True),
        ("previous_layer", "hi", "[CLS]", True),
    ]
    assert cell["value"].to_list() == pytest.approx([1.0, 0.2, 0.25])
    shown = partition_rows(conn, "pascual_hta_pattern_maps", "org--m")
    assert set(zip(shown["pattern"], shown["layer"], shown["head"])) == {("vertical", 1, 2)}
    assert shown.height == 27


def test_hta_correlation_views_average_each_kind_over_every_row(conn: duckdb.DuckDBPyConnection) -> None:
    """Head 1-1's per-example mean correlations: previous-layer 0.9 (4 rows) and 0.5 (12 rows),
    input 0.2 and (undefined) None; each view's mean is over the rows of the corpus (Pascual: the
    mean of the per-row correlation values), so the 12-row example weighs three times as much."""
    upsert_model(conn, SPEC)
    rows = pl.DataFrame(
        {
            "example_id": [0, 1, 0, 1],
            "layer": [1] * 4,
            "head": [1] * 4,
            "kind": ["previous_layer", "previous_layer", "input", "input"],
            "pearson": [0.9, 0.5, 0.2, None],
            "spearman": [1.0, 0.5, 0.25, None],
            "hta_method": ["exact"] * 4,
            "n_rows": [4, 12, 4, 12],
        },
        schema_overrides={"pearson": pl.Float32, "spearman": pl.Float32, "n_rows": pl.Int16},
    )
    replace_partition(conn, {"hta_correlations": rows}, "org--m", "xnli_en")
    local = partition_rows(conn, "pascual_hta_local_correlation", "org--m").row(0, named=True)
    assert (local["layer"], local["head"], local["n_examples"]) == (1, 1, 2)
    assert (local["pearson"], local["spearman"]) == pytest.approx(((0.9 * 4 + 0.5 * 12) / 16, (4 + 0.5 * 12) / 16))
    assert local["relative_depth"] == pytest.approx(0.5)
    glob = partition_rows(conn, "pascual_hta_global_correlation", "org--m").row(0, named=True)
    assert (glob["pearson"], glob["spearman"]) == pytest.approx((0.2, 0.25))


def _histogram(sums: list[float], head: int) -> pl.DataFrame:
    """One attention head of layer 1 over offsets -1, 0, 1 with pair counts 2, 4, 2."""
    return pl.DataFrame(
        {
            "example_id": [0] * 3,
            "kind": ["attention"] * 3,
            "scope": ["all"] * 3,
            "layer": [1] * 3,
            "head": [head] * 3,
            "offset": [-1, 0, 1],
            "weight_sum": sums,
            "pair_count": [2, 4, 2],
        }
    )


def test_each_xnli_language_is_drawn_by_its_own_model_where_one_has_rows(conn: duckdb.DuckDBPyConnection) -> None:
    """Models: org/en (language en), org/de (language de), org/ar (language ar, no rows) and org/m
    (no language), each with one or two heads in layer 1. Head "past" has values 1, 0.25, 0.5 at
    offsets -1, 0, 1: center (-1 + 0.5) / 1.75 = -2/7; head "future" 0, 0, 1.5: center 1.
    xnli_en: org/en's own line only (its heads past and future: (-2/7 + 1) / 2 = 5/14), not org/de's
    nor org/m's; xnli_de: org/de (future: 1); xnli_ar: its own model has no rows, so org/m (past: -2/7)."""
    past, future = [2.0, 1.0, 1.0], [0.0, 0.0, 3.0]
    for model_id, language in (("org--en", "en"), ("org--de", "de"), ("org--ar", "ar"), ("org--m", None)):
        upsert_model(
            conn, dataclasses.replace(SPEC, model_id=model_id, source=model_id.replace("--", "/"), language=language)
        )
    facts = {
        ("org--en", "xnli_en"): [_histogram(past, 1), _histogram(future, 2)],
        ("org--de", "xnli_de"): [_histogram(future, 1), _histogram(future, 2)],
        ("org--de", "xnli_en"): [_histogram(future, 1), _histogram(future, 2)],
        ("org--m", "xnli_en"): [_histogram(past, 1), _histogram(past, 2)],
        ("org--m", "xnli_de"): [_histogram(past, 1), _histogram(past, 2)],
        ("org--m", "xnli_ar"): [_histogram(past, 1), _histogram(past, 2)],
        ("org--m", "demo"): [_histogram(past, 1), _histogram(past, 2)],
    }
    for (model_id, corpus), heads in facts.items():
        replace_partition(conn, {"position_histograms": pl.concat(heads)}, model_id, corpus)
    rows = conn.execute(
        "SELECT language, corpus, model, model_id, language_model, center_of_mass "
        "FROM pascual_language_center_of_mass ORDER BY corpus"
    ).fetchall()
    assert [row[:5] for row in rows] == [
        ("ar", "xnli_ar", "org/m", "org--m", False),
        ("de", "xnli_de", "org/de", "org--de", True),
        ("en", "xnli_en", "org/en", "org--en", True),
    ]
    assert [row[5] for row in rows] == pytest.approx([-2 / 7, 1.0, 5 / 14])
    # Without registered languages every model with rows draws its line (demo is no XNLI language).
    conn.execute("UPDATE models SET language = NULL")
    lines = conn.execute(
        "SELECT corpus, model_id, language_model FROM pascual_language_center_of_mass ORDER BY corpus, model_id"
    ).fetchall()
    assert lines == [
        ("xnli_ar", "org--m", False),
        ("xnli_de", "org--de", False),
        ("xnli_de", "org--m", False),
        ("xnli_en", "org--de", False),
        ("xnli_en", "org--en", False),
        ("xnli_en", "org--m", False),
    ]
