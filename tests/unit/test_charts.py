"""Charts drawn from view rows, and which rows the registry hands them."""

import dataclasses
import io

import altair as alt
import duckdb
import polars as pl
import pytest

from dagster_project.presentation.chart_registry import CHARTS, XNLI_CORPORA
from dagster_project.presentation.charts import pascual
from dagster_project.presentation.charts.clark import (
    LINES_PER_QUERY,
    clark_fig1_head_maps_chart,
    clark_fig5_head_maps_chart,
    clark_head_distances_chart,
    clark_head_mds_chart,
)
from dagster_project.presentation.charts.common import (
    CHART_SCALE,
    PATTERN_ORDER,
    chart_png,
    png_width,
    save_chart,
    short_model_name,
)
from dagster_project.presentation.charts.compare import compare_head_matches_chart, depth_curves_chart
from dagster_project.presentation.charts.kovaleva import kovaleva_pattern_examples_chart, kovaleva_task_scores_chart
from dagster_project.presentation.charts.pascual import (
    pascual_correlation_chart,
    pascual_hta_pattern_maps_chart,
    pascual_language_center_of_mass_chart,
)
from dagster_project.presentation.paper_marks import all_paper_marks, paper_marks
from dagster_project.storage.claims import load_claims

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
    panels = spec["vconcat"]
    assert [panel["title"] for panel in panels] == ["Pearson", "Spearman"]
    drawn = [
        sorted((row["coefficient"], row["head"], row["correlation"]) for row in spec["datasets"][panel["data"]["name"]])
        for panel in panels
    ]
    assert drawn == [[("Pearson", 1, 0.9), ("Pearson", 2, 0.7)], [("Spearman", 1, 0.8), ("Spearman", 2, 0.6)]]
    assert all(
        panel["layer"][1]["encoding"]["y"] == {"aggregate": "median", "field": "correlation", "type": "quantitative"}
        for panel in panels
    )


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


def test_fig4_draws_each_language_by_the_model_the_view_picks_and_names_it() -> None:
    """pascual_language_center_of_mass rows: German by its own model g, English and Arabic by m.
    g's chart and m's chart both show every language (the model has a line on one of them); a
    model with no line in the view has no chart; the legend names g as the German model."""
    conn = duckdb.connect(":memory:")
    conn.execute(
        "CREATE TABLE lang AS SELECT * FROM (VALUES "
        "('g', 'org/g', 'xnli_de', 'de', true, 1, -0.5), ('m', 'org/m', 'xnli_ar', 'ar', false, 1, 0.25), "
        "('m', 'org/m', 'xnli_en', 'en', false, 1, 0.5)"
        ") AS t(model_id, model, corpus, language, language_model, layer, center_of_mass)"
    )
    spec = dataclasses.replace(SPECS["pascual_fig4_center_of_mass_languages"], view="lang")
    assert SPECS["pascual_fig4_center_of_mass_languages"].view == "pascual_language_center_of_mass"
    corpus, rows = spec.rows(conn, "g")
    assert corpus == "xnli_en, xnli_de, xnli_ar"
    assert rows.select("model_id", "corpus").rows() == [("g", "xnli_de"), ("m", "xnli_en"), ("m", "xnli_ar")]
    assert spec.title(rows, corpus).startswith("g on ") and spec.source(rows) == "org/g"
    assert spec.rows(conn, "m")[0] == "xnli_en, xnli_de, xnli_ar"
    assert spec.rows(conn, "other") is None
    drawn = rows.with_columns(kind=pl.lit("attention"), scope=pl.lit("content"))
    chart = pascual_language_center_of_mass_chart(drawn, spec.title(rows, corpus)).to_dict()
    (data,) = chart["datasets"].values()
    assert [row["drawn_by"] for row in data] == ["org/g (de model)", "org/m", "org/m"]
    assert chart["facet"]["column"]["sort"] == ["xnli_en", "xnli_de", "xnli_ar"]
    assert chart["spec"]["encoding"]["color"]["title"] == "drawn by"
    assert {"field": "language_model", "title": "language's own model", "type": "nominal"} in chart["spec"]["encoding"][
        "tooltip"
    ]


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


def test_titles_use_the_short_name_and_captions_the_source() -> None:
    assert short_model_name("/tmp/C/models/all-mpnet-base-v2") == "all-mpnet-base-v2"
    assert short_model_name("/tmp/C/models/all-mpnet-base-v2/") == "all-mpnet-base-v2"
    assert short_model_name("sentence-transformers/all-MiniLM-L6-v2") == "all-MiniLM-L6-v2"
    assert short_model_name("bert-base-uncased") == "bert-base-uncased"
    # a random-weights control is never named like its trained model
    assert short_model_name("random-init:sentence-transformers/all-MiniLM-L6-v2") == "all-MiniLM-L6-v2 (random init)"
    assert short_model_name("random-init:/tmp/C/models/all-mpnet-base-v2/@seed=3") == (
        "all-mpnet-base-v2 (random init, seed 3)"
    )
    assert short_model_name("/tmp/C/name@seed=3") == "name@seed=3"
    rows = pl.DataFrame({"model": ["/home/me/checkpoints/all-mpnet-base-v2"], "layer": [1]})
    spec = SPECS["clark_fig4_entropy"]
    assert spec.title(rows, "demo") == "all-mpnet-base-v2 on demo"
    assert spec.source(rows) == "/home/me/checkpoints/all-mpnet-base-v2"


def _per_head_rows(model: str, n_layers: int, heads: int = 2, **columns: float) -> pl.DataFrame:
    """Per-head rows of a model, with relative_depth = (layer - 0.5) / n_layers as the views compute it."""
    layers = [layer for layer in range(1, n_layers + 1) for _ in range(heads)]
    return pl.DataFrame(
        {
            "model": model,
            "model_id": model.replace("/", "--"),
            "corpus": "demo",
            "layer": layers,
            "head": [head for _ in range(n_layers) for head in range(1, heads + 1)],
            "relative_depth": [(layer - 0.5) / n_layers for layer in layers],
            **{name: [value * layer for layer in layers] for name, value in columns.items()},
        }
    )


def test_depth_curves_overlay_models_of_different_depths() -> None:
    rows = pl.concat([_per_head_rows("org/six", 6, entropy=0.1), _per_head_rows("/models/twelve", 12, entropy=0.05)])
    chart = depth_curves_chart(rows, "six on demo", ("entropy",), "entropy")
    spec = chart.to_dict()
    data = _data(spec)
    assert {row["model_name"] for row in data} == {"six", "twelve"}
    assert {row["source"] for row in data} == {"org/six", "/models/twelve"}
    # the last layer of either model sits at the same relative depth as its own (layer - 0.5) / n
    depths = {(row["model_name"], row["layer"]): row["relative_depth"] for row in data}
    assert depths["six", 6] == 5.5 / 6 and depths["twelve", 12] == 11.5 / 12
    line, heads = spec["spec"]["layer"]
    assert line["encoding"]["x"]["field"] == "relative_depth"
    assert line["encoding"]["y"] == {"aggregate": "mean", "field": "value", "type": "quantitative", "title": "entropy"}
    assert heads["mark"]["type"] == "point"  # no interval columns: no error bars
    assert spec["facet"]["column"]["field"] == "corpus"


def test_depth_curves_draw_the_interval_where_the_view_has_one() -> None:
    rows = _per_head_rows("org/six", 2, entropy=1.0).with_columns(
        ci_low=pl.col("entropy") - 0.1, ci_high=pl.col("entropy") + 0.2
    )
    spec = depth_curves_chart(rows, "six on demo", ("entropy",), "entropy").to_dict()
    bars = spec["spec"]["layer"][-1]
    assert bars["mark"]["type"] == "rule"
    assert (bars["encoding"]["y"]["field"], bars["encoding"]["y2"]["field"]) == ("ci_low", "ci_high")
    first = next(row for row in _data(spec) if row["layer"] == 1 and row["head"] == 1)
    assert (first["value"], first["ci_low"], first["ci_high"]) == pytest.approx((1.0, 0.9, 1.2))
    # Several values from one view: a shared ci_low/ci_high cannot say whose interval it is; <value>_ci_low can.
    several = rows.with_columns(to_sep=pl.col("entropy"), to_sep_ci_low=0.0, to_sep_ci_high=2.0)
    data = _data(depth_curves_chart(several, "t", ("entropy", "to_sep"), "x").to_dict())
    assert {(row["series"], row.get("ci_high")) for row in data} == {("entropy", None), ("to_sep", 2.0)}


def test_compare_charts_show_every_model_with_rows_on_the_corpus() -> None:
    conn = duckdb.connect(":memory:")
    rows = pl.concat([_per_head_rows("org/six", 6, entropy=0.1), _per_head_rows("/models/twelve", 12, entropy=0.05)])
    conn.register("entropy_rows", rows.to_arrow())
    spec = dataclasses.replace(SPECS["compare_entropy"], view="entropy_rows")
    corpus, found = spec.rows(conn, "--models--twelve")
    assert corpus == "demo"
    assert found["model"].unique(maintain_order=True).to_list() == ["/models/twelve", "org/six"]
    assert spec.label == "Models compared: attention entropy (nats)" and spec.paper == "compare"


def test_view_sums_reach_the_charts_as_floats() -> None:
    """A view's sum of integers is a DuckDB HUGEINT, a polars Decimal, which Vega-Lite's JSON cannot hold."""
    conn = duckdb.connect(":memory:")
    conn.execute(
        "CREATE VIEW framenet AS SELECT 'm' AS model_id, 'm' AS model, 'framenet' AS corpus, 1 AS layer, 1 AS head, "
        "0.2 AS mean_max_attention, 0.1 AS p99, true AS above_p99, sum(3::BIGINT) AS n_links"
    )
    spec = dataclasses.replace(SPECS["kovaleva_fig3_framenet_heads"], view="framenet")
    corpus, rows = spec.rows(conn, "m")
    assert rows.schema["n_links"] == pl.Float64
    spec.draw(rows, spec.title(rows, corpus)).to_json()


def test_head_matches_chart_has_a_panel_per_other_model() -> None:
    rows = pl.DataFrame(
        {
            "model": "org/six",
            "layer": [1, 2],
            "head": [1, 1],
            "relative_depth": [0.25, 0.75],
            "other_model": ["/models/all-mpnet-base-v2", "/models/all-mpnet-base-v2"],
            "other_layer": [2, 4],
            "other_head": [3, 1],
            "other_relative_depth": [0.375, 0.875],
            "js_distance": [0.2, 0.3],
            "runner_up_distance": [0.25, 0.31],
            "n_examples": [3, 3],
            "n_words": [40, 40],
        }
    )
    spec = compare_head_matches_chart(rows, "six on demo").to_dict()
    assert spec["facet"]["column"]["field"] == "other"
    assert {(row["other"], row["head_label"], row["match_label"]) for row in _data(spec)} == {
        ("all-mpnet-base-v2", "1-1", "2-3"),
        ("all-mpnet-base-v2", "2-1", "4-1"),
    }


def test_pattern_example_maps_share_the_map_cells_of_the_hta_maps() -> None:
    rows = pl.DataFrame(
        {
            "task": ["demo"] * 2,
            "pattern": ["vertical"] * 2,
            "layer": [1, 1],
            "head": [2, 2],
            "example_id": [7, 7],
            "query": [0, 1],
            "key": [1, 0],
            "attention": [0.9, 0.4],
            "query_token": ["[CLS]", "a"],
            "key_token": ["a", "[CLS]"],
        }
    )
    spec = kovaleva_pattern_examples_chart(rows, "m on demo").to_dict()
    encoding = spec["spec"]["encoding"]
    assert (encoding["x"]["field"], encoding["y"]["field"], encoding["color"]["field"]) == ("key", "query", "attention")
    assert encoding["color"]["scale"] == {"scheme": "blues", "domain": [0, 1]}
    assert [tip if isinstance(tip, str) else tip["field"] for tip in encoding["tooltip"]] == [
        "map",
        "query_token",
        "key_token",
        "attention",
    ]
    assert {row["map"] for row in _data(spec)} == {"demo L1-H2 ex. 7"}


def test_head_distances_chart_orders_heads_by_layer() -> None:
    rows = pl.DataFrame(
        {
            "layer_a": [2, 1, 1, 2],
            "head_a": [1, 2, 1, 1],
            "layer_b": [1, 1, 2, 2],
            "head_b": [1, 1, 1, 1],
            "js": [0.5, 0.25, 0.5, 0.0],
        }
    )
    spec = clark_head_distances_chart(rows, "tiny").to_dict()
    assert spec["encoding"]["y"]["sort"] == ["1-1", "1-2", "2-1"]
    assert [(row["head"], row["other"], row["js"]) for row in _data(spec)] == [
        ("1-1", "2-1", 0.5),
        ("1-2", "1-1", 0.25),
        ("2-1", "1-1", 0.5),
        ("2-1", "2-1", 0.0),
    ]


def test_task_scores_chart_draws_each_tasks_headline_metric() -> None:
    rows = pl.DataFrame(
        {
            "task": ["mrpc", "mrpc", "stsb", "stsb"],
            "setting": ["pretrained", "pretrained", "pretrained", "pretrained"],
            "metric": ["accuracy", "f1", "pearson", "spearman"],
            "score": [0.7, 0.8, 0.5, 0.4],
            "paper_score": [0.83, None, 0.88, None],
            "n_examples": [408, 408, 1500, 1500],
        }
    )
    spec = kovaleva_task_scores_chart(rows, "tiny").to_dict()
    assert [(row["task"], row["metric"], row["score"]) for row in _data(spec)] == [
        ("mrpc", "accuracy", 0.7),
        ("stsb", "pearson", 0.5),
    ]


def _head_map_rows(
    figure: str, corpus: str, role: str, head: int, example: int, n: int, gold_links=None
) -> pl.DataFrame:
    """clark_head_example_maps rows of one named head (layer 2) on one example of n tokens: query q
    puts 0.9 on key (q + 1) mod n and spreads the rest evenly over the others."""
    cells = [(q, k) for q in range(n) for k in range(n)]
    weight = [0.9 if k == (q + 1) % n else 0.1 / (n - 1) for q, k in cells]
    return pl.DataFrame(
        {
            "model": "org/m",
            "corpus": corpus,
            "figure": figure,
            "role": role,
            "layer": 2,
            "head": head,
            "score": 0.75,
            "direction": "dependent->head" if figure == "Fig. 5" and role != "coreference" else None,
            "example_id": example,
            "query": [q for q, _ in cells],
            "key": [k for _, k in cells],
            "query_token": [f"t{q}" for q, _ in cells],
            "key_token": [f"t{k}" for _, k in cells],
            "attention": weight,
            "gold_links": gold_links,
        },
        schema_overrides={"gold_links": pl.Int64, "direction": pl.String},
    )


def test_head_maps_charts_draw_a_panel_per_named_head_in_the_papers_order() -> None:
    fig1 = pl.concat(
        [
            _head_map_rows("Fig. 1", "wiki_segments", role, head, example, 4)
            for role, head in (("[SEP]", 3), ("next token", 2), ("broad", 1))
            for example in (1, 0)
        ]
    )
    fig5 = pl.concat(
        [
            _head_map_rows("Fig. 5", "ud_ewt_test", "det", 4, 0, 3, 0),
            _head_map_rows("Fig. 5", "ud_ewt_test", "det", 4, 1, 3, 2),  # the example that has determiners
            _head_map_rows("Fig. 5", "ud_ewt_test", "dobj", 5, 0, 3, 0),
            _head_map_rows("Fig. 5", "ud_ewt_test", "dobj", 5, 1, 3, 0),
            _head_map_rows("Fig. 5", "ontogum", "coreference", 6, 0, 3, 4),
            _head_map_rows("Fig. 5", "ontogum", "det", 7, 0, 3, 1),  # det is drawn from the first corpus only
        ]
    )
    rows = pl.concat([fig1, fig5])
    spec = clark_fig1_head_maps_chart(rows, "m on wiki_segments").to_dict()
    titles = [panel["title"]["text"] for panel in spec["hconcat"]]
    assert titles == ["Head 2-1: broad (0.75 nats)", "Head 2-2: next token (0.75)", "Head 2-3: [SEP] (0.75)"]
    assert spec["hconcat"][0]["title"]["subtitle"] == ["attends broadly", "wiki_segments, ex. 0"]
    edges = spec["datasets"][spec["hconcat"][0]["layer"][0]["data"]["name"]]
    # every weight is drawn (0.1 / 3 = 0.033 >= 0.02): 4 x 4 lines, the 0.9 ones to the next token
    assert len(edges) == 16 and {(row["query"], row["key"]) for row in edges if row["attention"] == 0.9} == {
        (0, 1),
        (1, 2),
        (2, 3),
        (3, 0),
    }
    tokens = spec["datasets"][spec["hconcat"][0]["layer"][1]["data"]["name"]]
    assert [row["token"] for row in tokens] == ["t0", "t1", "t2", "t3"]

    spec = clark_fig5_head_maps_chart(rows, "m on ud_ewt_test, ontogum").to_dict()
    panels = {panel["title"]["text"]: panel["title"]["subtitle"] for panel in spec["hconcat"]}
    assert panels == {
        "Head 2-5: dobj (75.0% dependent->head)": [
            "direct objects attend to their verbs",
            "ud_ewt_test, ex. 0: no dobj in the kept examples",
        ],
        "Head 2-4: det (75.0% dependent->head)": ["determiners attend to their noun", "ud_ewt_test, ex. 1"],
        "Head 2-6: coreference (75.0%)": ["coreferent mentions attend to their antecedents", "ontogum, ex. 0"],
    }
    assert list(panels) == [
        "Head 2-5: dobj (75.0% dependent->head)",
        "Head 2-4: det (75.0% dependent->head)",
        "Head 2-6: coreference (75.0%)",
    ]


def test_head_maps_of_128_tokens_stay_within_altairs_rows() -> None:
    rows = _head_map_rows("Fig. 1", "wiki_segments", "broad", 1, 0, 128).with_columns(
        attention=pl.lit(1 / 40)  # 128 lines per query above the threshold: the largest LINES_PER_QUERY are kept
    )
    spec = clark_fig1_head_maps_chart(rows, "m on wiki_segments").to_dict()
    edges = spec["datasets"][spec["hconcat"][0]["layer"][0]["data"]["name"]]
    assert len(edges) == 128 * LINES_PER_QUERY
    assert spec["hconcat"][0]["height"] == 128 * 9
    empty = clark_fig5_head_maps_chart(rows, "m on ud_ewt_test").to_dict()  # no Fig. 5 head: a note, not an error
    assert "no head is named for Fig. 5" in str(empty)


def test_head_maps_charts_are_registered_for_the_papers_corpora() -> None:
    fig1, fig5 = SPECS["clark_fig1_head_maps"], SPECS["clark_fig5_head_maps"]
    assert (fig1.figure, fig1.view, fig1.corpora[0]) == ("Fig. 1", "clark_head_example_maps", "wiki_segments")
    assert (fig5.figure, fig5.view, fig5.corpora, fig5.all_corpora) == (
        "Fig. 5",
        "clark_head_example_maps",
        ("ud_ewt_test", "ontogum"),
        True,
    )
    assert fig1.when_empty and fig5.when_empty  # the demo corpus keeps no whole maps


def test_appendix_c_draws_every_head_of_the_shortest_example_cropped() -> None:
    def cells(example_id: int, n: int) -> pl.DataFrame:
        grid = pl.DataFrame({"query": range(n)}).join(pl.DataFrame({"key": range(n)}), how="cross")
        heads = pl.DataFrame({"layer": [1, 1, 2, 2], "head": [1, 2, 1, 2]})
        maps = pl.DataFrame({"map": ["attention", "previous_layer", "input"]})
        return (
            grid.join(heads, how="cross")
            .join(maps, how="cross")
            .with_columns(
                example_id=example_id,
                value=0.5,
                query_token=pl.lit("a"),
                key_token=pl.lit("b"),
                pattern=pl.lit("block"),
            )
        )

    rows = pl.concat([cells(7, 40), cells(3, 30)])
    spec = pascual.pascual_hta_all_heads_chart(rows, "t").to_dict()
    assert spec["title"] == "t: every head on example 3"
    panels = spec["vconcat"]
    assert [panel["title"] for panel in panels] == ["attention", "previous-layer contribution", "input contribution"]
    values = spec["datasets"][panels[0]["data"]["name"]]
    assert {value["example_id"] for value in values} == {3}
    assert max(value["query"] for value in values) == pascual.APPENDIX_C_TOKENS - 1
    assert len(values) == 4 * pascual.APPENDIX_C_TOKENS**2  # every head, one map kind per panel


# The paper's numbers on the charts (presentation/paper_marks.py): fixture rows of a 12-layer model
# per chart with marks, drawn through the registry as the report draws them.
_LAYERS = 12


def _heads_rows(n_layers: int = _LAYERS) -> pl.DataFrame:
    """Every per-head column the marked charts read, two heads per layer."""
    cells = [(layer, head) for layer in range(1, n_layers + 1) for head in (1, 2)]
    return pl.DataFrame(
        {
            "model": ["m"] * len(cells),
            "task": ["rte"] * len(cells),
            "layer": [layer for layer, _ in cells],
            "head": [head for _, head in cells],
            "relative_depth": [(layer - 0.5) / n_layers for layer, _ in cells],
            **{
                name: [0.3] * len(cells)
                for name in ("to_cls", "to_sep", "to_punct", "sep_to_sep", "pearson", "spearman")
            },
            **{name: [2.0] * len(cells) for name in ("entropy", "cls_entropy", "uniform_entropy")},
            "mean_max_attention": [0.1] * len(cells),
            "p99": [0.15] * len(cells),
            "above_p99": [False] * len(cells),
            "metric": ["accuracy"] * len(cells),
            "score": [80.5] * len(cells),
            "baseline_score": [80.0] * len(cells),
            "delta_vs_baseline": [0.5] * len(cells),
            "delta_rank": [1] * len(cells),
            "n_heads": [len(cells)] * len(cells),
        }
    )


def _marked_rows(chart: str) -> pl.DataFrame:
    if chart == "clark_table1_dependency_heads":
        relations = ["All", "prep", "pobj", "det", "nn", "nsubj", "amod", "dobj", "advmod", "aux", "poss"]
        relations += ["auxpass", "ccomp", "mark", "prt"]
        return pl.DataFrame(
            {
                "relation": relations,
                "layer": [3] * 15,
                "head": [2] * 15,
                "direction": ["dependent->head"] * 15,
                "accuracy": [0.6] * 15,
                "baseline_offset": [1] * 15,
                "baseline_accuracy": [0.4] * 15,
                "n": list(range(200, 185, -1)),
            }
        )
    if chart == "clark_table2_coreference":
        systems = ["nearest", "head match", "rule-based", "head 5-2"]
        cells = [(system, mention) for system in systems for mention in ("all", "pronoun", "proper", "nominal")]
        return pl.DataFrame(
            {
                "corpus": ["ontogum"] * 16,
                "system": [system for system, _ in cells],
                "mention_type": [mention for _, mention in cells],
                "accuracy": [0.5] * 16,
                "n": [10] * 16,
            }
        )
    if chart == "kovaleva_fig2_pattern_shares":
        return pl.DataFrame(
            {
                "task": ["mrpc"] * 5,
                "model": ["m"] * 5,
                "role": ["pre-trained"] * 5,
                "pattern": PATTERN_ORDER,
                "pattern_order": list(range(5)),
                "share": [0.2] * 5,
                "maps": [10] * 5,
            }
        )
    if chart == "compare_weightings_hta_agreement":
        return _agreement_rows()
    rows = _heads_rows()
    return rows.filter(pl.col("head") == 1) if chart == "kovaleva_fig9_layer_ablation" else rows


def _agreement_rows(n_layers: int = _LAYERS) -> pl.DataFrame:
    """compare_weightings_hta_agreement's rows of two weightings per layer (per_layer: globenc 0.9, attention
    0.2 in every layer) and rolled out (globenc 0.7, attention 0.0)."""
    cells = [
        (weighting, aggregation, layer)
        for aggregation in ("per_layer", "rolled_out")
        for weighting in ("globenc", "attention")
        for layer in range(1, n_layers + 1)
    ]
    values = {("globenc", "per_layer"): 0.9, ("attention", "per_layer"): 0.2, ("globenc", "rolled_out"): 0.7}
    return pl.DataFrame(
        {
            "model": ["m"] * len(cells),
            "weighting": [weighting for weighting, _, _ in cells],
            "aggregation": [aggregation for _, aggregation, _ in cells],
            "hta_method": ["exact"] * len(cells),
            "layer": [layer for _, _, layer in cells],
            "relative_depth": [(layer - 0.5) / n_layers for _, _, layer in cells],
            "spearman": [values.get((weighting, aggregation), 0.0) for weighting, aggregation, _ in cells],
            "ci_low": [values.get((weighting, aggregation), 0.0) - 0.05 for weighting, aggregation, _ in cells],
            "ci_high": [values.get((weighting, aggregation), 0.0) + 0.05 for weighting, aggregation, _ in cells],
            "n_examples": [40] * len(cells),
            "n_rows": [900] * len(cells),
        }
    )


def test_hta_agreement_chart_draws_a_panel_per_aggregation_and_the_papers_number_on_the_per_layer_one() -> None:
    spec = SPECS["compare_weightings_hta_agreement"].draw(_agreement_rows(6), "m on xnli_en").to_dict()
    per_layer, rolled_out = spec["hconcat"]
    assert (per_layer["title"], rolled_out["title"]) == ("each layer's own map", "maps rolled out through the layers")
    for panel, expected in ((per_layer, {("globenc", 0.9), ("attention", 0.2)}), (rolled_out, {("globenc", 0.7)})):
        lines, intervals = panel["layer"][:2]
        assert lines["mark"]["type"] == "line" and lines["encoding"]["color"]["field"] == "weighting"
        assert (intervals["encoding"]["y"]["field"], intervals["encoding"]["y2"]["field"]) == ("ci_low", "ci_high")
        assert intervals["encoding"]["y"]["title"] == lines["encoding"]["y"]["title"] == "mean row Spearman with HTA"
        values = spec["datasets"][panel["data"]["name"]]
        assert {(value["weighting"], value["spearman"]) for value in values} >= expected
        assert len(values) == 12  # two weightings, six layers
    # GlobEnc's 0.84 is of each layer's own map: on that panel only (its rule and label)
    assert len(per_layer["layer"]) == 4 and len(rolled_out["layer"]) == 2
    (mark,) = spec["datasets"][per_layer["layer"][2]["data"]["name"]]
    assert (mark["paper_value"], mark["paper_label"]) == (0.84, "GlobEnc BERT-base: 0.84 or more in every layer")


def test_faithfulness_chart_draws_a_panel_per_aggregation() -> None:
    rows = pl.DataFrame(
        {
            "model": ["m"] * 4,
            "weighting": ["globenc", "attention"] * 2,
            "aggregation": ["per_layer"] * 2 + ["rolled_out"] * 2,
            "spearman": [0.4, 0.3, 0.8, -0.1],
            "mean_spearman": [0.4, 0.3, 0.8, -0.1],
            "ci_low": [0.3, 0.2, 0.7, -0.2],
            "ci_high": [0.5, 0.4, 0.9, 0.0],
            "n_examples": [872] * 4,
        }
    )
    spec = SPECS["compare_weightings_faithfulness"].draw(rows, "m on glue_sst2").to_dict()
    assert spec["facet"]["column"]["field"] == "panel"
    assert spec["facet"]["column"]["sort"] == ["each layer's own map", "maps rolled out through the layers"]
    values = spec["datasets"][spec["data"]["name"]]
    assert {(value["panel"], value["weighting"], value["spearman"]) for value in values} == {
        ("each layer's own map", "globenc", 0.4),
        ("each layer's own map", "attention", 0.3),
        ("maps rolled out through the layers", "globenc", 0.8),
        ("maps rolled out through the layers", "attention", -0.1),
    }


def _drawn_marks(chart) -> list[dict]:
    """Every data row of the chart's spec that carries a paper label (the marks' own rows)."""
    found = []

    def walk(node) -> None:
        if isinstance(node, dict):
            if "paper_label" in node:
                found.append(node)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(chart.to_dict())
    return found


MARKED_CHARTS = sorted({mark.chart for mark in all_paper_marks()})
# Literals equal to a claim's number of the same chart by coincidence: Pascual's Spearman threshold
# 0.9 (Fig. 1), where pascual_fig1_pearson_above_085's paper_value 0.9 is a share of heads (90%).
COINCIDENT_LITERALS = {("pascual_fig1_local_correlation", (0.9,))}


def test_the_papers_numbers_are_registered_for_the_charts_the_issue_names() -> None:
    """Clark Fig. 2's 0.5 in layers 6-10, Fig. 4's 3.89, Tables 1/2; Kovaleva Fig. 2's 32-61%,
    Fig. 3's 0.201/0.209, Figs. 8/9; Pascual's 0.7/0.85/0.5/0.25; numbers a claim holds come from it."""
    marks = {(mark.chart, mark.values): mark for mark in all_paper_marks()}
    assert marks["clark_fig2_special_tokens", (0.5,)].layers == (6, 10)
    assert marks["clark_fig2_special_tokens", (0.5,)].claim == "clark_sep_layers_6_10"
    assert marks["clark_fig4_entropy", (3.89,)].claim == "clark_cls_entropy_last_layer"
    table1 = {dict(mark.at)["relation"]: mark for mark in paper_marks("clark_table1_dependency_heads")}
    assert (
        len(table1) == 15
        and table1["det"].values == (0.943,)
        and table1["det"].claim == "clark_table1_det_beats_baseline"
    )
    table2 = {
        dict(mark.at)["system"] + "/" + dict(mark.at)["mention_type"]: mark.values
        for mark in paper_marks("clark_table2_coreference")
    }
    assert len(table2) == 16 and table2["head/all"] == (0.65,) and table2["head match/nominal"] == (0.4,)
    assert marks["kovaleva_fig2_pattern_shares", (0.32, 0.61)].kind == "band"
    assert {mark.values for mark in paper_marks("kovaleva_fig3_framenet_heads")} == {(0.201,), (0.209,)}
    assert {mark.values for mark in paper_marks("kovaleva_fig8_head_ablation")} == {(0.1,), (1.2,)}
    assert marks["kovaleva_fig9_layer_ablation", (3.2,)].relative_to == "baseline_score"
    assert {mark.values for mark in paper_marks("pascual_fig1_local_correlation", "Pearson")} == {(0.7,), (0.85,)}
    assert {mark.values for mark in paper_marks("pascual_fig6_global_correlation", "Pearson")} == {(0.5,), (0.25,)}
    claims = {claim.claim: claim for claim in load_claims()}
    for mark in all_paper_marks():
        assert mark.chart in SPECS, mark
        if mark.claim is not None:  # the claim's number, on the chart's scale (Tables 1/2: % on a 0-1 axis)
            scale = 0.01 if mark.chart.startswith(("clark_table1", "clark_table2")) else 1
            assert mark.values == (pytest.approx(claims[mark.claim].paper_value * scale),), mark
            assert claims[mark.claim].chart == mark.chart or mark.chart == "kovaleva_sec5_framenet_ablation", mark
        elif (mark.chart, mark.values) not in COINCIDENT_LITERALS:  # a literal only where no claim holds it
            held = {claims[c].paper_value for c in claims if claims[c].chart == mark.chart} - {None}
            assert not set(mark.values) & (held | {value / 100 for value in held}), mark


@pytest.mark.parametrize("chart", MARKED_CHARTS)
def test_each_chart_draws_its_papers_numbers_with_their_labels(chart: str) -> None:
    spec = SPECS[chart]
    rows = _marked_rows(chart)
    drawn = _drawn_marks(spec.draw(rows, spec.title(rows.with_columns(model=pl.lit("m")), "c")))
    for mark in paper_marks(chart):
        value = mark.values[0] + (80.0 if mark.relative_to == "baseline_score" else 0)
        found = [
            row for row in drawn if row["paper_label"] == mark.label and row["paper_value"] == pytest.approx(value)
        ]
        assert found, f"{chart}: {mark.label} ({value}) not drawn; drawn: {drawn}"
        row = found[0]
        if mark.kind == "band":
            assert row["paper_value2"] == mark.values[1]
        if mark.kind == "tick":
            at = dict(mark.at)
            if at.get("system") == "head":  # the paper's head 5-4 stands on the model's best head
                at["system"] = "head 5-2"
            assert {key: row[key] for key in at} == at
        if mark.layers is not None:  # on a 12-layer model the mark spans the paper's own layers
            assert (row["layer"], row["layer_end"]) == mark.layers
    assert len(drawn) >= len(paper_marks(chart))


def test_depth_dependent_marks_span_the_layers_at_the_papers_relative_depth() -> None:
    """Of 6 layers, layers 4 and 5 stand at BERT-base layers ceil(12 * 3.5 / 6) = 7 and
    ceil(12 * 4.5 / 6) = 9 (Clark's layers 6-10); the last layer stands for BERT-base's 12th."""
    six = _heads_rows(6)
    fig2 = _drawn_marks(SPECS["clark_fig2_special_tokens"].draw(six, "m on c"))
    assert {(row["paper_value"], row["layer"], row["layer_end"]) for row in fig2} == {(0.5, 4, 5), (0.9, 4, 5)}
    fig4 = _drawn_marks(SPECS["clark_fig4_entropy"].draw(six, "m on c"))
    assert {(row["paper_value"], row["layer"], row["layer_end"]) for row in fig4} == {(3.89, 6, 6)}
    fig6 = _drawn_marks(SPECS["pascual_fig6_global_correlation"].draw(six, "m on c"))
    # after layer 4 (BERT-base 5-12): layers 3-6 (BERT-base 5, 7, 9, 11); last four (9-12): 5-6
    spans = {(row["paper_label"], row["layer"], row["layer_end"]) for row in fig6}
    assert {(label.split(" below")[0], first, last) for label, first, last in spans} == {
        ("Pascual: most heads", 3, 6),
        ("Pascual: median", 5, 6),
        ("Pascual: median", 2, 6),
        ("Pascual: median", 6, 6),
    }


def test_a_chart_drawn_again_from_the_same_rows_is_rendered_once(tmp_path) -> None:
    def drawn(values: list[float]) -> alt.Chart:
        rows = pl.DataFrame({"layer": [1 + index % 2 for index in range(len(values))], "value": values})
        return alt.Chart(rows).mark_bar().encode(x="layer:O", y="value:Q")

    html, png = save_chart(drawn([0.25, 0.5]), tmp_path, "bars")
    again = chart_png(drawn([0.25, 0.5]))  # the report, drawing the chart asset's chart again
    assert again is chart_png(drawn([0.25, 0.5])) and png.read_bytes() == again
    other = chart_png(drawn([0.25, 0.75]))
    assert other != again
    assert png_width(chart_png(drawn([0.5] * 6000))) > 0  # more rows than Altair's default limit, as save allows
    # Vega-Lite's default bar chart is 2 x 20 pixels of band plus axes; the PNG holds CHART_SCALE per pixel.
    unscaled = io.BytesIO()
    drawn([0.25, 0.5]).save(unscaled, format="png")
    assert png_width(again) == pytest.approx(png_width(unscaled.getvalue()) * CHART_SCALE, abs=1)
    # the very bytes Altair's own save writes at that scale
    saved = io.BytesIO()
    drawn([0.25, 0.75]).save(saved, format="png", scale_factor=CHART_SCALE)
    assert other == saved.getvalue()
