"""The scorecard of a warehouse whose judgments are hand-made (the judges themselves are tested on
hand-made view rows in tests/views/test_claims.py): the view's rows per model, the CLI's three
formats and its errors, the Python API and the report's first page linking each claim to its chart."""

from pathlib import Path

import duckdb
import pytest

from dagster_project.api import open_warehouse
from dagster_project.cli import main
from dagster_project.compute.models import ModelSpec
from dagster_project.presentation.report import write_report
from dagster_project.presentation.report_data import read_report_data
from dagster_project.presentation.scorecard import format_scorecard, scorecard_rows, verdict_counts
from dagster_project.storage.claims import load_claims
from dagster_project.storage.model_rows import record_reproduction, upsert_model
from dagster_project.storage.views import apply_views

SIX = ModelSpec("org--six", "org/six", "/models/six", "abc", "bert", 6, 12, True)
TWELVE = ModelSpec("org--twelve", "org/twelve", "/models/twelve", "abc", "bert", 12, 12, True)
# The six-layer model's random-weights control (compute/controls.py names it).
CONTROL = ModelSpec("org--six--random-init", "random-init:org/six", "/models/six-random", "r", "bert", 6, 12, True)
CLAIMS = len(load_claims())
# Three judgments of the six-layer model and one of its control; every other (claim, model) has none.
JUDGMENTS = """
CREATE OR REPLACE VIEW claim_judgments AS
SELECT claim, model_id, corpus, value::DOUBLE AS value, value_low::DOUBLE AS value_low,
    value_high::DOUBLE AS value_high, verdict, reason, n
FROM (VALUES
    ('clark_sep_layers_6_10', 'org--six', 'wiki_segments', 0.62, 0.55, 0.7, 'holds', 'mean to [SEP] 0.620', 24),
    ('clark_sep_to_sep', 'org--six', 'wiki_segments', 0.41, 0.3, 0.5, 'fails', 'mean [SEP] to [SEP] 0.410', 24),
    ('clark_cls_early_layers', 'org--six', 'wiki_segments', 3, 1, 7, 'inconclusive', 'the [CLS] layer', 72),
    ('clark_sep_layers_6_10', 'org--six--random-init', 'wiki_segments', 0.6, 0.52, 0.66, 'holds', 'uniform', 24)
) AS t(claim, model_id, corpus, value, value_low, value_high, verdict, reason, n)
"""


@pytest.fixture
def warehouse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "warehouse.duckdb"
    monkeypatch.setenv("ATTN_WAREHOUSE", str(path))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))
    with duckdb.connect(str(path)) as conn:
        apply_views(conn)
        upsert_model(conn, SIX)
        upsert_model(conn, TWELVE)
        upsert_model(conn, CONTROL)
        record_reproduction(conn, "org--six", "quick")
        conn.execute(JUDGMENTS)
    return path


def test_every_claim_has_a_row_per_model_with_the_paper_number(warehouse: Path) -> None:
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        rows = scorecard_rows(conn)
        six = scorecard_rows(conn, "org/six")
        clark = scorecard_rows(conn, "org--twelve", "clark")
    assert rows.height == 3 * CLAIMS
    assert verdict_counts(six) == {
        "holds": 1,
        "fails": 1,
        "inconclusive": 1,
        "not comparable": 0,
        "missing": CLAIMS - 3,
    }
    held = six.filter(six["claim"] == "clark_sep_layers_6_10").row(0, named=True)
    assert (held["paper_value"], held["model_value"], held["verdict"], held["profile"]) == (0.5, 0.62, "holds", "quick")
    assert (held["value_low"], held["value_high"], held["unit"]) == (0.55, 0.7, "heads")
    # the control's verdict beside the base's: this finding holds on random weights too
    assert (held["control_model_id"], held["control_verdict"], held["holds_for_control"]) == (
        CONTROL.model_id,
        "holds",
        True,
    )
    failed = six.filter(six["claim"] == "clark_sep_to_sep").row(0, named=True)
    assert (failed["control_verdict"], failed["holds_for_control"]) == ("missing", False)
    control = rows.filter(rows["model_id"] == CONTROL.model_id)
    assert control["control_verdict"].null_count() == CLAIMS  # a control has no control of its own
    assert held["paper_text"] == "> 0.5 in layers 6-10"
    assert set(clark["paper"]) == {"clark"} and set(clark["profile"]) == {"run"}
    assert set(clark["verdict"]) == {"missing"} and all(reason.startswith("needs ") for reason in clark["reason"])


def test_unknown_model_or_paper_names_the_choices(warehouse: Path) -> None:
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        with pytest.raises(ValueError, match="its models are org/six, org/twelve, random-init:org/six"):
            scorecard_rows(conn, "org/none")


def test_formats(warehouse: Path) -> None:
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        six = scorecard_rows(conn, "org--six", "clark")
    markdown = format_scorecard(six, "markdown")
    clark_claims = six.height
    assert markdown.startswith(
        f"### org/six (quick profile): {clark_claims} claims: 1 holds, 1 fails, 1 inconclusive, 0 not comparable"
    )
    assert "1 hold for its random-init control too" in markdown.splitlines()[0]
    assert (
        "| Fig. 2 | clark_sep_layers_6_10 | wiki_segments | > 0.5 in layers 6-10 | 0.62 | 0.55 | 0.7 | holds | holds |"
        in markdown
    )
    csv = format_scorecard(six, "csv").splitlines()
    assert csv[0].startswith("paper,claim,result,chart,section,quote,model,model_id,corpus,paper_value,")
    assert len(csv) == clark_claims + 1


def test_the_cli_prints_the_scorecard(warehouse: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["scorecard", "org/six", "--paper", "clark", "--format", "markdown"]) == 0
    assert (
        "puts over half of the attention on [SEP] | 0.41 | 0.3 | 0.5 | fails | missing | mean [SEP] to [SEP] 0.410 |"
        in capsys.readouterr().out
    )
    assert main(["scorecard"]) == 0
    out = capsys.readouterr().out
    assert f"org/six (quick profile): {CLAIMS} claims: 1 holds, 1 fails, 1 inconclusive" in out
    assert "org/twelve (run profile)" in out
    assert main(["scorecard", "org/none"]) == 2
    assert "no model 'org/none'" in capsys.readouterr().err


def test_the_cli_says_when_the_views_are_older_than_the_scorecard(warehouse: Path, capsys) -> None:
    with duckdb.connect(str(warehouse)) as conn:
        conn.execute("DROP VIEW reproduction_scorecard")
    assert main(["scorecard"]) == 2
    assert "`attn-warehouse run` recreates the views" in capsys.readouterr().err


def test_the_api_reads_the_scorecard(warehouse: Path) -> None:
    with open_warehouse() as opened:
        rows = opened.scorecard("org/six", "clark")
    assert rows.filter(rows["verdict"] == "fails")["claim"].to_list() == ["clark_sep_to_sep"]


def test_the_report_opens_on_the_scorecard_linking_each_claim_to_its_chart(warehouse: Path, tmp_path: Path) -> None:
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        data = read_report_data(conn, specs=[])
    index = write_report(data, tmp_path / "report", specs=[])[0].read_text()
    assert "Scorecard: does each paper" in index
    assert index.index("Scorecard") < index.index("<h2>Models</h2>")
    assert '<tr class="verdict-holds" data-claim="clark_sep_layers_6_10">' in index
    assert 'href="clark.html#org--six/clark_fig2_special_tokens"' not in index  # no Clark chart registered here
    assert f"{CLAIMS} claims: 1 holds, 1 fails, 1 inconclusive" in index
