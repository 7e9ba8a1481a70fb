"""The scorecard matrix of the hand-made warehouse of tests/views/test_scorecard_matrix.py (two models,
two random-init controls of one, a claim judged on two corpora): `attn-warehouse scorecard --matrix`
in its three formats and its errors, the chart (one mark per claim and model, a fixed colour per
verdict) and the report's section."""

import json
from pathlib import Path

import duckdb
import polars as pl
import pytest

from dagster_project.cli import main
from dagster_project.presentation.charts.compare import scorecard_matrix_chart
from dagster_project.presentation.report import write_report
from dagster_project.presentation.report_data import read_report_data
from dagster_project.presentation.scorecard import MATRIX_VERDICTS, VERDICT_COLOURS, matrix_rows, matrix_text
from dagster_project.storage.views import apply_views
from tests.views.test_scorecard_matrix import CLAIMS, TWO_TASKS, write_matrix_warehouse


@pytest.fixture
def warehouse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "warehouse.duckdb"
    monkeypatch.setenv("ATTN_WAREHOUSE", str(path))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))
    with duckdb.connect(str(path)) as conn:
        apply_views(conn)
        write_matrix_warehouse(conn)
    return path


def _line(out: str, label: str) -> list[str]:
    """The four cells of the one line of `out` that `label` heads."""
    words = label.split()
    [line] = [
        line for line in out.splitlines() if line.split()[: len(words)] == words and len(line.split()) == len(words) + 4
    ]
    return line.split()[len(words) :]


def test_the_cli_prints_claims_by_models_with_a_legend_and_counts(warehouse: Path, capsys) -> None:
    assert main(["scorecard", "--matrix"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{CLAIMS} claims x 4 models (scorecard_matrix)")
    assert "  1   alpha: org/alpha, quick profile\n" in out
    assert "  1r  alpha (random init): random-init control of 1 (org/alpha), run profile\n" in out
    assert "  1r3 alpha (random init, seed 3): random-init control of 1 (org/alpha), seed 3, run profile\n" in out
    assert "  2   beta: org/beta, run profile\n" in out
    assert "incon = inconclusive | n/c = not comparable | mixed (the corpora that judged it disagree" in out
    assert _line(out, "claim") == ["1", "1r", "1r3", "2"]
    assert _line(out, "clark_sep_layers_6_10") == ["holds", "holds", "-", "fails"]
    assert _line(out, "clark_sep_to_sep") == ["incon", "fails", "-", "holds"]
    assert _line(out, TWO_TASKS) == ["mixed", "holds", "-", "holds"]
    assert _line(out, "pascual_fig4_other_languages") == ["-", "-", "-", "n/c"]
    assert _line(out, "holds") == ["1", "2", "0", "2"]
    assert _line(out, "fails") == ["0", "1", "0", "1"]
    assert _line(out, "inconclusive") == ["1", "0", "0", "0"]
    assert _line(out, "not comparable") == ["0", "0", "0", "1"]
    assert _line(out, "mixed") == ["1", "0", "0", "0"]
    assert _line(out, "missing") == [str(CLAIMS - 3), str(CLAIMS - 3), str(CLAIMS), str(CLAIMS - 4)]
    # org/alpha and its (seed-0) control both hold clark_sep_layers_6_10; org/beta has no control
    assert _line(out, "holds for its random control too") == ["1", "-", "-", "-"]
    assert f"  1   {TWO_TASKS}: glue_mrpc holds; glue_rte fails" in out
    assert max(len(line) for line in out.splitlines()) <= 120


def test_a_claim_too_long_for_a_narrow_table_has_its_cells_on_the_next_line(warehouse: Path) -> None:
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        rows = matrix_rows(conn)
    out = matrix_text(rows, width=55)
    # 55 - 3 - 4 columns of 7: 24 characters for the claims
    assert f"\n  {TWO_TASKS}\n{' ' * 27}mixed  holds  -      holds\n" in out
    assert "\n  clark_sep_to_sep         incon  fails  -      holds\n" in out
    # only an id longer than the table is wider: it stands whole on its line
    claims = set(rows["claim"])
    assert {line.strip() in claims for line in out.splitlines() if len(line) > 55} <= {True}


def test_the_matrix_as_markdown_csv_and_one_paper(warehouse: Path, capsys) -> None:
    assert main(["scorecard", "--matrix", "--paper", "clark", "--format", "markdown"]) == 0
    out = capsys.readouterr().out
    assert "- **1r alpha (random init)**: random-init control of 1 (org/alpha), run profile" in out
    assert "| paper | claim | 1 alpha | 1r alpha (random init) | 1r3 alpha (random init, seed 3) | 2 beta |" in out
    assert "| clark | clark_sep_to_sep | inconclusive | fails | missing | holds |" in out
    assert "| holds for its random control too | 1 |  |  |  |" in out
    assert TWO_TASKS not in out
    assert main(["scorecard", "--matrix", "--format", "csv"]) == 0
    csv = capsys.readouterr().out.splitlines()
    assert len(csv) == 4 * CLAIMS + 1 and "control_verdict" in csv[0]


def test_the_cli_refuses_a_model_with_the_matrix(warehouse: Path, capsys) -> None:
    assert main(["scorecard", "org/alpha", "--matrix"]) == 2
    assert "--matrix shows every model side by side: drop 'org/alpha'" in capsys.readouterr().err
    with duckdb.connect(str(warehouse)) as conn:
        conn.execute("DROP VIEW scorecard_matrix")
    assert main(["scorecard", "--matrix"]) == 2
    assert "has no scorecard_matrix view yet" in capsys.readouterr().err


def test_the_chart_has_one_mark_per_claim_and_model_in_its_verdict_colour(warehouse: Path) -> None:
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        rows = matrix_rows(conn)
    spec = scorecard_matrix_chart(rows, "Scorecard").to_dict()
    [values] = spec["datasets"].values()
    cells = pl.DataFrame(values)
    assert cells.height == 4 * CLAIMS and cells.select("claim", "column").n_unique() == 4 * CLAIMS
    colour = spec["encoding"]["color"]
    assert colour["scale"] == {"domain": list(MATRIX_VERDICTS), "range": [VERDICT_COLOURS[v] for v in MATRIX_VERDICTS]}
    labels = ["1 alpha", "1r alpha (random init)", "1r3 alpha (random init, seed 3)", "2 beta"]
    assert spec["encoding"]["x"]["sort"] == labels
    shown = cells.filter(pl.col("claim") == TWO_TASKS).select("column", "verdict").rows()
    assert shown == list(zip(labels, ["mixed", "holds", "missing", "holds"], strict=True))
    assert {tooltip["field"] for tooltip in spec["encoding"]["tooltip"]} >= {"model_value", "reason", "corpora"}
    json.dumps(spec)  # Vega-Lite takes it as it is


def test_the_report_index_shows_the_matrix(warehouse: Path, tmp_path: Path) -> None:
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        data = read_report_data(conn, specs=[])
    index = write_report(data, tmp_path / "report", specs=[])[0].read_text()
    assert index.index("every model side by side") < index.index("does each paper")
    assert f"{CLAIMS} claims x 4 models (random-init controls: 2," in index
    assert '<figure data-chart="scorecard_matrix"><img' in index
    assert '<th title="random-init control of 1 (org/alpha), run profile">1r alpha (random init)</th>' in index
    row = index[index.index(f'<tr data-claim="{TWO_TASKS}">') :].split("</tr>")[0]
    assert row.count("<td class=") == 4
    assert f'class="verdict-mixed" data-model="org--alpha" style="background:{VERDICT_COLOURS["mixed"]}' in row
    assert 'title="glue_mrpc: mrpc +0.28; glue_rte: rte -0.10 [glue_mrpc holds; glue_rte fails]">mixed</td>' in row
