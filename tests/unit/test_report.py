"""The static report's pieces without a browser: paper grouping, headline numbers, the CLI; and,
on a fixture warehouse of a bare encoder and a checkpoint fine-tuned from it, the model menu's
order, short names, what a missing chart needs, the few-examples warning and the heads' pages."""

import html
import json
import re
import shlex
from pathlib import Path

import duckdb
import polars as pl
import pytest

from dagster_project.cli import main
from dagster_project.compute.models import ModelSpec
from dagster_project.presentation.chart_registry import CHARTS
from dagster_project.presentation.report import (
    HEADLINES,
    QUICK_NOTE,
    _missing_note,
    charts_by_paper,
    headline_table,
    ranked_models,
    write_report,
)
from dagster_project.presentation.report_data import (
    HEAD_LINKS,
    ReportData,
    finetuned_from,
    model_names,
    read_report_data,
)
from dagster_project.storage.claims import load_claims
from dagster_project.storage.model_rows import record_reproduction, upsert_model
from dagster_project.storage.partition_writes import replace_partition
from dagster_project.storage.views import apply_views

SPEC = ModelSpec("org--tiny", "org/tiny", "/models/tiny", "abc", "bert", 2, 2, True)


def test_charts_are_grouped_by_their_paper():
    assert next(spec for spec in CHARTS if spec.name == "clark_fig2_special_tokens").label == "Clark et al. Fig. 2"
    papers = charts_by_paper()
    assert sorted(spec.name for specs in papers.values() for spec in specs) == sorted(spec.name for spec in CHARTS)
    assert all(spec.paper == paper for paper, specs in papers.items() for spec in specs)
    assert {"clark", "pascual"} <= set(papers)


def test_headline_table_aggregates_heads_per_layer():
    rows = pl.DataFrame(
        {"layer": [1, 1, 2, 2], "head": [1, 2, 1, 2], "to_sep": [0.2, 0.7, 0.4, 0.1], "to_cls": [0.5, 0.1, 0.3, 0.3]}
    )
    data = ReportData(
        pl.DataFrame({"model_id": [SPEC.model_id]}), {(SPEC.model_id, "clark_fig2_special_tokens"): ("demo", rows)}
    )
    headlines = [headline for headline in HEADLINES if headline.chart == "clark_fig2_special_tokens"]
    table = headline_table(data, headlines, SPEC.model_id)
    assert table.columns == [
        "layer",
        "max attention to [SEP] over heads (demo)",
        "mean attention to [SEP] over heads (demo)",
        "paper: mean attention to [SEP] over heads",
        "max attention to [CLS] over heads (demo)",
    ]
    # mean to [SEP]: (0.2 + 0.7) / 2 = 0.45, (0.4 + 0.1) / 2 = 0.25; of 2 layers, layer 2 stands at
    # BERT-base layer ceil(12 * 1.5 / 2) = 9, within Clark's layers 6-10 ("over half ... on [SEP]": 0.5)
    rounded = [tuple(round(value, 6) if isinstance(value, float) else value for value in row) for row in table.rows()]
    assert rounded == [(1, 0.7, 0.45, None, 0.5), (2, 0.4, 0.25, 0.5, 0.3)]
    assert headline_table(data, headlines, "other-model") is None


def test_headline_tables_give_the_papers_value_at_its_relative_depth():
    """A 6-layer model: Clark's 0.5 on [SEP] (layers 6-10) at its layers 4 and 5 (BERT-base layers
    ceil(12 * 3.5 / 6) = 7 and ceil(12 * 4.5 / 6) = 9), the [CLS] entropy of 3.89 nats at its last
    layer; both values the claims'."""
    claims = {claim.claim: claim for claim in load_claims()}
    layers = list(range(1, 7))
    rows = pl.DataFrame(
        {
            "layer": layers,
            "head": [1] * 6,
            "relative_depth": [(layer - 0.5) / 6 for layer in layers],
            "to_sep": [0.1] * 6,
            "to_cls": [0.2] * 6,
            "entropy": [1.0] * 6,
            "cls_entropy": [2.0] * 6,
        }
    )
    charts = {
        (SPEC.model_id, chart): ("wiki_segments", rows) for chart in ("clark_fig2_special_tokens", "clark_fig4_entropy")
    }
    data = ReportData(pl.DataFrame({"model_id": [SPEC.model_id]}), charts)
    table = headline_table(data, [headline for headline in HEADLINES if headline.paper], SPEC.model_id)
    sep, cls = claims["clark_sep_layers_6_10"].paper_value, claims["clark_cls_entropy_last_layer"].paper_value
    assert (sep, cls) == (0.5, 3.89)
    assert table["paper: mean attention to [SEP] over heads"].to_list() == [None, None, None, sep, sep, None]
    assert table["paper: mean [CLS] entropy over heads (nats)"].to_list() == [None] * 5 + [cls]


def test_report_command_writes_pages_with_what_to_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
):
    warehouse = tmp_path / "warehouse.duckdb"
    monkeypatch.setenv("ATTN_WAREHOUSE", str(warehouse))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))
    assert main(["report", "--out", str(tmp_path / "report")]) == 2
    assert f"no warehouse at {warehouse}" in capsys.readouterr().err

    with duckdb.connect(str(warehouse)) as conn:
        upsert_model(conn, SPEC)
    assert main(["report", "--out", str(tmp_path / "report")]) == 0
    assert f"report: {tmp_path / 'report' / 'index.html'}" in capsys.readouterr().out
    clark = (tmp_path / "report" / "clark.html").read_text()
    assert '<option value="org--tiny">tiny</option>' in clark
    assert '<p class="apart">No results on this page: <span title="org/tiny">tiny</span>' in clark
    # No view has rows: every chart is a note naming the command that fills it.
    assert clark.count('class="missing"') == len(charts_by_paper()["clark"])
    assert "attn-warehouse run org/tiny --corpus wiki_segments" in clark
    assert "attn-warehouse reproduce --quick" in clark
    assert "data:image/png" not in clark


def test_missing_chart_notes_quote_the_command_for_the_shell():
    spec = next(spec for spec in CHARTS if spec.analysis == "hta")
    note = _missing_note(spec, "m", "org/m; rm -rf x", "no rows")
    command = html.unescape(re.search(r"<code>(attn-warehouse run .*?)</code>", note)[1])
    assert command == f"attn-warehouse run 'org/m; rm -rf x' --corpus {spec.corpora[0]} --hta"
    assert shlex.split(command)[2] == "org/m; rm -rf x"


def _summaries(n_layers: int) -> pl.DataFrame:
    layers = [layer for layer in range(1, n_layers + 1) for _ in range(2)]
    return pl.DataFrame(
        {
            "example_id": [0] * len(layers),
            "layer": layers,
            "head": [1, 2] * n_layers,
            "n_tokens": [5] * len(layers),
            **{column: [0.1 * layer for layer in layers] for column in ("to_cls", "to_sep", "to_punct", "entropy")},
        },
        schema_overrides={"layer": pl.Int16, "head": pl.Int16, "n_tokens": pl.Int16},
    )


def test_compare_page_overlays_every_model(tmp_path: Path) -> None:
    """Two models of different depths: the compare page draws each one's charts with the other beside
    it; titles use the short name and captions the source."""
    local = ModelSpec("local--deep-1234", "/checkpoints/deep", "/checkpoints/deep", "abc", "mpnet", 4, 2, False)
    conn = duckdb.connect(":memory:")
    apply_views(conn)
    for spec in (SPEC, local):
        upsert_model(conn, spec)
        replace_partition(conn, {"head_summaries": _summaries(spec.n_layers)}, spec.model_id, "demo")
    compare_specs = [spec for spec in CHARTS if spec.name in {"compare_entropy", "compare_head_matches"}]
    data = read_report_data(conn, compare_specs)
    corpus, rows = data.chart_rows[local.model_id, "compare_entropy"]
    assert corpus == "demo" and rows["model"].unique(maintain_order=True).to_list() == ["/checkpoints/deep", "org/tiny"]
    assert rows.filter(pl.col("model_id") == local.model_id)["relative_depth"].unique().sort().to_list() == [
        0.125,
        0.375,
        0.625,
        0.875,
    ]
    write_report(data, tmp_path, compare_specs)
    page = (tmp_path / "compare.html").read_text()
    assert page.count('<figure data-chart="compare_entropy">') == 2  # one per model's section
    assert "model <code>/checkpoints/deep</code>" in page and "model <code>org/tiny</code>" in page
    assert page.count('<p class="missing" data-chart="compare_head_matches">') == 2  # no head_matches rows yet
    assert next(spec for spec in compare_specs if spec.name == "compare_entropy").title(rows, corpus) == "deep on demo"
    assert '<a href="compare.html">' in (tmp_path / "index.html").read_text()


BASE = "sentence-transformers/all-MiniLM-L6-v2"
SEP_HEAD = (2, 1)  # the fixture's head with the most attention to [SEP]


def _fixture_warehouse(tmp_path: Path) -> tuple[duckdb.DuckDBPyConnection, ModelSpec, ModelSpec]:
    """A bare sentence-transformers encoder (config: BertModel, no loss head) with head summaries
    of 3 wiki_segments examples and the kept maps of the first two, and an RTE checkpoint
    fine-tuned from it, in the fine-tuning asset's folder naming, with no rows on any page."""
    base_path = tmp_path / "hub" / "minilm"
    base_path.mkdir(parents=True)
    (base_path / "config.json").write_text(json.dumps({"architectures": ["BertModel"], "model_type": "bert"}))
    base = ModelSpec(BASE.replace("/", "--"), BASE, str(base_path), "abc", "bert", 2, 2, True)
    tuned_path = tmp_path / "models_cache" / "finetuned" / f"{base.model_id}--rte"
    tuned = ModelSpec(f"local--{tuned_path.name}-1234abcd", str(tuned_path), str(tuned_path), "def", "bert", 2, 2, True)
    conn = duckdb.connect(":memory:")
    apply_views(conn)
    for spec in (base, tuned):
        upsert_model(conn, spec)
    summaries = pl.concat(
        _summaries(2).with_columns(
            example_id=pl.lit(example),
            to_sep=pl.when((pl.col("layer") == SEP_HEAD[0]) & (pl.col("head") == SEP_HEAD[1])).then(0.9).otherwise(0.2),
            **{column: pl.lit(0.1) for column in ("to_self", "to_prev", "to_next", "sep_to_sep", "cls_entropy")},
        )
        for example in range(3)
    )
    tokens = ["[CLS]", "the", "cat", "[SEP]"]
    token_rows = pl.DataFrame(
        {
            "example_id": [example for example in (0, 1) for _ in tokens],
            "position": [position for _ in (0, 1) for position in range(len(tokens))],
            "token_id": [101, 1996, 4937, 102] * 2,
            "token": tokens * 2,
            "token_class": ["cls", "other", "other", "sep"] * 2,
            "is_special": [True, False, False, True] * 2,
            "segment": [0] * 8,
        },
        schema_overrides={"position": pl.Int16, "segment": pl.Int8},
    )
    # every head attends to [SEP] (key 3) with 0.7 and spreads the rest over the other keys
    maps = pl.DataFrame(
        {
            "example_id": [example for example in (0, 1) for _ in range(16)],
            "layer": [layer for _ in (0, 1) for layer in (1, 2) for _ in range(8)],
            "head": [head for _ in range(4) for head in (1, 2) for _ in range(4)],
            "query": list(range(4)) * 8,
            "attention": [[0.1, 0.1, 0.1, 0.7]] * 32,
            "kept_examples": [2] * 32,
        },
        schema_overrides={"layer": pl.Int16, "head": pl.Int16, "query": pl.Int16, "attention": pl.List(pl.Float32)},
    )
    replace_partition(
        conn,
        {"head_summaries": summaries, "tokens": token_rows, "head_example_maps": maps},
        base.model_id,
        "wiki_segments",
    )
    return conn, base, tuned


def test_models_are_ranked_by_their_results_on_the_page() -> None:
    """Most charts with the model's own rows first; a chart drawing only other models' rows counts
    for none; models without rows apart."""
    specs = [spec for spec in CHARTS if spec.paper == "clark"][:3]
    own = {model: pl.DataFrame({"model_id": [model], "layer": [1]}) for model in ("a", "b", "c")}
    data = ReportData(
        pl.DataFrame({"model_id": ["a", "b", "c", "d"], "source": ["o/a", "o/b", "o/c", "o/d"]}),
        {
            ("a", specs[0].name): ("demo", own["a"]),
            ("b", specs[0].name): ("demo", own["b"]),
            ("b", specs[1].name): ("demo", own["b"]),
            ("c", specs[0].name): ("demo", own["a"]),  # only another model's rows
            ("d", specs[2].name): "no rows",
        },
    )
    assert ranked_models(data, specs) == (["b", "a"], ["c", "d"])


def test_short_names_say_what_a_checkpoint_was_fine_tuned_from() -> None:
    assert finetuned_from("/x/models_cache/finetuned/sentence-transformers--all-MiniLM-L6-v2--rte") == (
        "sentence-transformers--all-MiniLM-L6-v2",
        "rte",
    )
    assert finetuned_from("/x/checkpoints/model--rte") is None
    models = pl.DataFrame(
        {
            "model_id": ["org--base", "local--org--base--sst2-1", "local--other--stsb-2"],
            "source": ["org/base", "/m/finetuned/org--base--sst2", "/m/finetuned/other--stsb"],
        }
    )
    assert model_names(models) == {
        "org--base": "base",
        "local--org--base--sst2-1": "base fine-tuned on SST-2",
        "local--other--stsb-2": "other fine-tuned on STS-B",
    }


def test_pages_open_on_results_and_say_what_is_missing(tmp_path: Path) -> None:
    conn, base, tuned = _fixture_warehouse(tmp_path)
    data = read_report_data(conn)
    assert data.name(tuned.model_id) == "all-MiniLM-L6-v2 fine-tuned on RTE"
    write_report(data, tmp_path / "report")
    clark = (tmp_path / "report" / "clark.html").read_text()

    # The menu opens on the model with rows; the fine-tuned one (first by id) is listed apart.
    options = re.findall(r'<option value="([^"]+)">([^<]+)</option>', clark)
    assert options == [
        (base.model_id, "all-MiniLM-L6-v2"),
        (tuned.model_id, "all-MiniLM-L6-v2 fine-tuned on RTE"),
    ]
    assert (
        clark.index("<select") < clark.index('<optgroup label="no results on this page">') < clark.index(tuned.model_id)
    )
    assert "No results on this page: <span" in clark and ">all-MiniLM-L6-v2 fine-tuned on RTE</span>" in clark
    assert f'<h2 title="{html.escape(tuned.source)}">all-MiniLM-L6-v2 fine-tuned on RTE</h2>' in clark
    assert f'<p class="source">source: <code>{html.escape(tuned.source)}</code></p>' in clark
    assert f"<h2>{html.escape(tuned.source)}</h2>" not in clark

    # Fig. 3 on a bare encoder: what it needs, not a command.
    base_section = clark[clark.index(f'data-model="{base.model_id}"') : clark.index(f'data-model="{tuned.model_id}"')]
    fig3 = re.search(r'<p class="missing" data-chart="clark_fig3_grad_importance"[^>]*>(.*?)</p>', base_section)
    assert fig3[1] == (
        "Clark et al. Fig. 3: needs a model with a masked-LM or classification head (its training loss is what the "
        "gradients are of); all-MiniLM-L6-v2 has none (its config&#x27;s architectures: BertModel)."
    )
    # A chart the model lacks nothing for names the command that fills it.
    assert f"attn-warehouse run {BASE} --corpus ud_ewt_test" in base_section
    kovaleva = (tmp_path / "report" / "kovaleva.html").read_text()
    assert re.search(
        r'data-chart="kovaleva_table1_task_scores" data-needs="pretrained">Kovaleva et al. Table 1: needs a '
        r"pre-trained model.*?; all-MiniLM-L6-v2 fine-tuned on RTE is itself a fine-tuned checkpoint",
        kovaleva,
    )

    # Three examples: the caption says so, and a warning says it is under the chart's minimum.
    fig2 = base_section[base_section.index('<figure data-chart="clark_fig2_special_tokens">') :]
    assert "rows; n = 3 examples (wiki_segments)</figcaption>" in fig2
    assert re.match(
        r'.*?</figure><p class="few" data-chart="clark_fig2_special_tokens">Few examples: '
        r"3 examples \(wiki_segments\), under this chart's minimum of 100 \(",
        fig2,
        re.S,
    )

    # The top [SEP] head links to its maps on the model's heads page.
    link = f'<a href="heads/{base.model_id}.html#L{SEP_HEAD[0]}-H{SEP_HEAD[1]}">{SEP_HEAD[0]}-{SEP_HEAD[1]}</a>'
    assert f"{link} (most attention to [SEP])" in fig2
    heads = (tmp_path / "report" / "heads" / f"{base.model_id}.html").read_text()
    section = heads[heads.index(f'<h2 id="L{SEP_HEAD[0]}-H{SEP_HEAD[1]}">') :].split("</section>")[0]
    assert "Clark et al. Fig. 2: most attention to [SEP] (wiki_segments)" in section
    assert '<figure data-head="L2-H1"><img alt="head 2-1 on the first examples of wiki_segments"' in section
    assert "data:image/png;base64," in section
    maps = data.head_maps[base.model_id].filter((pl.col("layer") == 2) & (pl.col("head") == 1))
    assert maps.height == 2 * 4 * 4  # both kept examples, every (query, key)
    assert maps.filter(pl.col("key_token") == "[SEP]")["attention"].min() == pytest.approx(0.7)
    assert not (tmp_path / "report" / "heads" / f"{tuned.model_id}.html").exists()


def test_a_quick_reproduction_is_labelled_on_its_model_only(tmp_path: Path) -> None:
    conn, base, tuned = _fixture_warehouse(tmp_path)
    record_reproduction(conn, base.model_id, "quick")
    record_reproduction(conn, base.model_id, "quick")  # replaced, not added
    record_reproduction(conn, tuned.model_id, "paper")
    data = read_report_data(conn)
    assert data.profiles == {base.model_id: "quick", tuned.model_id: "paper"}
    write_report(data, tmp_path / "report")
    clark = (tmp_path / "report" / "clark.html").read_text()
    base_section = clark[clark.index(f'data-model="{base.model_id}"') : clark.index(f'data-model="{tuned.model_id}"')]
    tuned_section = clark[clark.index(f'data-model="{tuned.model_id}"') :]
    assert QUICK_NOTE in base_section and QUICK_NOTE not in tuned_section


def test_table1_names_only_the_relations_with_a_head():
    # Table 1 shows every paper relation; one without an edge in the corpus has no head to link
    rows = pl.DataFrame(
        {
            "corpus": ["ud_ewt_test"] * 2,
            "relation": ["det", "auxpass"],
            "layer": [3, None],
            "head": [9, None],
            "direction": ["dependent->head", None],
        }
    )
    named = HEAD_LINKS["clark_table1_dependency_heads"](rows)
    assert named.rows() == [("ud_ewt_test", 3, 9, "best head for det (dependent->head)")]
