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
)
from dagster_project.storage.warehouse import upsert_model

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
