"""The results views' contracts (storage/view_contracts.py): every results view has one naming
its own columns, a view without one or a malformed one is refused with its file named, and the
checker finds hand-made duplicates, nulls and values out of range. That every view keeps its
contract on a warehouse the assets wrote: tests/integration/test_minilm.py and test_reproduce.py."""

import shutil
from dataclasses import replace
from pathlib import Path

import duckdb
import polars as pl
import pytest

from dagster_project.settings import SQL_DIR
from dagster_project.storage.sql_files import view_definitions
from dagster_project.storage.view_contracts import (
    ViewContract,
    check_contracts,
    contract_violations,
    load_contract,
    view_contracts,
)


def test_every_results_view_has_a_contract() -> None:
    results = [view.name for view in view_definitions() if view.layer == "results"]
    assert list(view_contracts()) == results
    assert len(results) == 37
    judgments = view_contracts()["claim_judgments"]
    assert (judgments.grain, judgments.ranges) == (("claim", "model_id", "corpus"), {"n": (0.0, None)})


def test_every_contract_names_columns_of_its_view(conn: duckdb.DuckDBPyConnection) -> None:
    """On the empty warehouse every rule holds, so a violation can only be a column the view lacks."""
    assert check_contracts(conn) == {}
    misspelt = ViewContract("claim_judgments", ("claim", "model_id", "corpora"))
    assert contract_violations(conn, misspelt) == [
        "claim_judgments: the contract names columns the view lacks: corpora "
        "(it has claim, corpus, model_id, n, reason, value, value_high, value_low, verdict)"
    ]


@pytest.fixture
def sql_copy(tmp_path: Path) -> Path:
    """A copy of sql/ to break."""
    return Path(shutil.copytree(SQL_DIR, tmp_path / "sql"))


def test_a_results_view_without_a_contract_fails_the_registry_check(sql_copy: Path) -> None:
    (sql_copy / "results" / "reproduction_scorecard.yaml").unlink()
    (sql_copy / "results" / "clark_new.sql").write_text("CREATE OR REPLACE VIEW clark_new AS SELECT 1 AS x;\n")
    with pytest.raises(ValueError) as raised:
        view_contracts(sql_copy)
    assert str(raised.value) == (
        f"results views without a contract: clark_new: {sql_copy}/results/clark_new.yaml; "
        f"reproduction_scorecard: {sql_copy}/results/reproduction_scorecard.yaml. Write each file with the view's "
        "grain and the ranges of its values (docs/howto/add-view.md)"
    )
    (sql_copy / "results" / "clark_new.yaml").write_text("grain: [x]\n")
    shutil.copy(SQL_DIR / "results" / "reproduction_scorecard.yaml", sql_copy / "results")
    assert view_contracts(sql_copy)["clark_new"] == ViewContract("clark_new", ("x",))
    (sql_copy / "results" / "clark_new.sql").unlink()
    with pytest.raises(ValueError, match=r"contracts of no results view: .*/results/clark_new\.yaml; rename"):
        view_contracts(sql_copy)


@pytest.mark.parametrize(
    ("text", "fault"),
    [
        ("not_null: [a]\n", "a contract is a mapping with at least a `grain`"),
        ("grain: [a]\nrange:\n  a: [0, 1]\n", r"unknown key\(s\) \['range'\]"),
        ("grain: a\n", "grain must be a list of column names, not 'a'"),
        ("grain: [a, a]\n", "grain names a column twice"),
        ("grain: [a]\nranges:\n  b: [0, 1, 2]\n", r"ranges\.b must be \[low, high\]"),
        ("grain: [a]\nranges:\n  b: [1, 0]\n", r"ranges\.b must bound the column, low <= high"),
        ("grain: [a]\nranges:\n  b: [null, null]\n", r"ranges\.b must bound the column"),
        ("grain: [a]\nranges:\n  b: [zero, 1]\n", r"ranges\.b's low must be a number or null, not 'zero'"),
        ("grain: [a]\naccepted_values:\n  b: x\n", r"accepted_values\.b must be a list"),
        ("grain: [a\n", "not YAML"),
    ],
)
def test_a_malformed_contract_is_refused_naming_its_file(tmp_path: Path, text: str, fault: str) -> None:
    path = tmp_path / "v.yaml"
    path.write_text(text)
    with pytest.raises(ValueError, match=f"^{path}: .*{fault}"):
        load_contract(path, "v")


def test_the_rules_read_as_words() -> None:
    contract = ViewContract(
        "v", ("a", "b"), ("a",), {"share": (0.0, 1.0), "n": (0.0, None), "gap": (None, 5.0)}, {"kind": ("x", "y")}
    )
    assert contract.rules() == [
        "grain: a, b",
        "not null: a",
        "share in [0, 1]",
        "n >= 0",
        "gap <= 5",
        "kind in {x, y}",
    ]


def test_the_checker_catches_duplicates_nulls_and_values_out_of_range() -> None:
    conn = duckdb.connect(":memory:")
    conn.execute(
        "CREATE VIEW v AS SELECT model_id, layer, share::DOUBLE AS share, r::DOUBLE AS r, kind FROM (VALUES "
        "('m', 1, 0.5, 0.0, 'x'), ('m', 1, 1.5, -0.5, 'x'), ('m', 2, NULL, 1.25, 'z'), "
        "('n', 2, 1.0 + 1e-12, -1.0, 'y'), ('n', 3, 0.0, NULL, NULL), "
        "('o', 1, 0.0, 'nan'::DOUBLE, 'x')) AS t (model_id, layer, share, r, kind)"
    )
    contract = ViewContract(
        "v", ("model_id", "layer"), ("share",), {"share": (0, 1), "r": (-1, 1)}, {"kind": ("x", "y")}
    )
    assert contract_violations(conn, contract) == [
        "v: 1 key(s) of the grain (model_id, layer) have several rows, e.g. ('m', 1) x2",
        "v.share: 1 row(s) are null",
        "v.share: 1 row(s) outside [0, 1], from 1.5 to 1.5",
        "v.r: 2 row(s) outside [-1, 1], from 1.25 to nan",  # NaN is in no range
        "v.kind: values outside {x, y}: 'z' x1",
    ]
    # the same rules on the rows that keep them: a share 1e-12 above 1 is float rounding, not a violation
    conn.execute("CREATE VIEW w AS SELECT * FROM v WHERE model_id = 'n'")
    assert contract_violations(conn, replace(contract, view="w")) == []


def test_a_results_view_contract_catches_a_duplicate_and_an_out_of_range_count() -> None:
    """claim_judgments' own contract on hand-made rows: a claim judged twice on one (model, corpus),
    a negative count and a verdict that is none of the four."""
    conn = duckdb.connect(":memory:")
    rows = pl.DataFrame(
        {
            "claim": ["clark_a", "clark_a", "clark_b"],
            "model_id": "m",
            "corpus": "wiki_segments",
            "value": [0.5, 0.6, 0.7],
            "verdict": ["holds", "fails", "maybe"],
            "reason": "hand-made",
            "n": [12, 12, -1],
        }
    )
    conn.register("rows", rows.to_arrow())
    conn.execute("CREATE TABLE claim_judgments AS SELECT * FROM rows")
    assert contract_violations(conn, view_contracts()["claim_judgments"]) == [
        "claim_judgments: 1 key(s) of the grain (claim, model_id, corpus) have several rows, "
        "e.g. ('clark_a', 'm', 'wiki_segments') x2",
        "claim_judgments.n: 1 row(s) outside [0, inf], from -1 to -1",
        "claim_judgments.verdict: values outside {holds, fails, inconclusive, not comparable}: 'maybe' x1",
    ]
