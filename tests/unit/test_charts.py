"""Charts drawn from view rows, and which rows the registry hands them."""

import dataclasses

import duckdb
import polars as pl

from dagster_project.presentation.chart_registry import CHARTS, XNLI_CORPORA
from dagster_project.presentation.charts import (
    clark_head_mds_chart,
    pascual_correlation_chart,
    pascual_hta_pattern_maps_chart,
)

SPECS = {spec.name: spec for spec in CHARTS}


def _data(spec: dict) -> list[dict]:
    return next(iter(spec["datasets"].values()))


def test_head_mds_is_coloured_by_behaviour_beside_layer() -> None:
    rows = pl.DataFrame(
        {
            "model": ["m"] * 3,
            "layer": [1, 2, 2],
            "head": [3, 1, 2],
            "x": [0.0, 1.0, 0.5],
            "y": [0.5, 0.0, 0.2],
            "stress": [0.1] * 3,
            "behaviour": ["previous", "broad", None],
        }
    )
    spec = clark_head_mds_chart(rows, "m on wiki_segments").to_dict()
    assert [panel["encoding"]["color"]["field"] for panel in spec["hconcat"]] == ["behaviour", "layer"]
    assert [(row["layer_head"], row["behaviour"]) for row in _data(spec)] == [
        ("1-3", "previous"),
        ("2-1", "broad"),
        ("2-2", "unknown"),
    ]


def test_correlation_charts_put_spearman_below_pearson() -> None:
    rows = pl.DataFrame({"layer": [1, 1], "head": [1, 2], "pearson": [0.9, 0.7], "spearman": [0.8, 0.6]})
    spec = pascual_correlation_chart(rows, "m on xnli_en").to_dict()
    assert spec["facet"]["row"]["field"] == "coefficient"
    assert sorted((row["coefficient"], row["head"], row["correlation"]) for row in _data(spec)) == [
        ("Pearson", 1, 0.9),
        ("Pearson", 2, 0.7),
        ("Spearman", 1, 0.8),
        ("Spearman", 2, 0.6),
    ]
    assert spec["spec"]["layer"][1]["encoding"]["y"] == {
        "aggregate": "median",
        "field": "correlation",
        "type": "quantitative",
    }


def test_center_of_mass_shows_every_language_and_every_model() -> None:
    """Model a has English and German rows, model b English and Arabic: a's Fig. 4 has both its
    languages side by side; across models, a's chart shows b beside it on English only."""
    conn = duckdb.connect(":memory:")
    conn.execute(
        "CREATE TABLE com AS SELECT * FROM (VALUES "
        "('a', 'A', 'xnli_de', 1), ('a', 'A', 'xnli_en', 1), ('b', 'B', 'xnli_en', 1), ('b', 'B', 'xnli_ar', 1)"
        ") AS t(model_id, model, corpus, layer)"
    )
    languages = dataclasses.replace(SPECS["pascual_fig4_center_of_mass"], view="com")
    corpus, rows = languages.rows(conn, "a")
    assert corpus == "xnli_en, xnli_de" and rows["corpus"].to_list() == ["xnli_en", "xnli_de"]
    models = dataclasses.replace(SPECS["pascual_fig4_center_of_mass_models"], view="com")
    corpus, rows = models.rows(conn, "a")
    assert corpus == "xnli_en, xnli_de"
    assert rows.select("model_id", "corpus").rows() == [("a", "xnli_en"), ("b", "xnli_en"), ("a", "xnli_de")]
    assert SPECS["pascual_fig4_center_of_mass"].corpora[:3] == XNLI_CORPORA == ("xnli_en", "xnli_de", "xnli_ar")


def test_hta_pattern_maps_chart_has_a_column_per_class_and_a_row_per_map() -> None:
    rows = pl.DataFrame(
        {
            "pattern": ["heterogeneous", "vertical"] * 3,
            "example_id": [4, 2] * 3,
            "layer": [2, 1] * 3,
            "head": [1, 2] * 3,
            "map": ["attention"] * 2 + ["previous_layer"] * 2 + ["input"] * 2,
            "query": [0] * 6,
            "key": [0] * 6,
            "query_token": ["[CLS]"] * 6,
            "key_token": ["[CLS]"] * 6,
            "value": [1.0] * 6,
        }
    )
    spec = pascual_hta_pattern_maps_chart(rows, "m on xnli_en").to_dict()
    assert spec["facet"]["column"]["sort"] == ["vertical (1-2, ex. 2)", "heterogeneous (2-1, ex. 4)"]
    assert spec["facet"]["row"]["sort"] == ["attention", "previous-layer contribution", "input contribution"]
    assert SPECS["pascual_fig7_hta_pattern_maps"].view == "pascual_hta_pattern_maps"
