"""The static report's pieces without a browser: paper grouping, headline numbers, the CLI."""

import html
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
    ReportData,
    _missing_note,
    charts_by_paper,
    headline_table,
    read_report_data,
    write_report,
)
from dagster_project.storage.warehouse import apply_views, replace_partition, upsert_model

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
    assert table.rows() == [(1, 0.7, 0.5), (2, 0.4, 0.3)]
    assert table.columns[1] == "max attention to [SEP] over heads (demo)"
    assert headline_table(data, headlines, "other-model") is None


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
    assert '<option value="org--tiny">org/tiny</option>' in clark
    # No view has rows: every chart is a note naming the command that fills it.
    assert clark.count('class="missing"') == len(charts_by_paper()["clark"])
    assert "attn-warehouse run org/tiny --corpus wiki_segments" in clark
    assert "data:image/png" not in clark


def test_missing_chart_notes_quote_the_command_for_the_shell():
    spec = next(spec for spec in CHARTS if spec.analysis == "hta")
    note = _missing_note(spec, "x--m", "org/m; rm -rf x", "no rows")
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
