"""Every claim of sql/claims judged on hand-made rows: for each claim, tests/views/claim_cases/<paper>.yaml
gives the rows of the views its judge reads for a case where the claim holds and one where it
fails (and, where the judge can say it, one that is not comparable), with the value the judge must
return, computed by hand. The rows stand in for the views as tables of the same name, so a judge
is checked on exactly the rows written here. A case may be written once for a templated claim
(its registry id with {names}), its strings filled from each claim's `each` item."""

from pathlib import Path

import duckdb
import polars as pl
import pytest
import yaml

from dagster_project.storage.claims import JUDGE_COLUMNS, PAPERS, VERDICTS, Claim, load_claims
from dagster_project.storage.views import apply_views

CASES_DIR = Path(__file__).parent / "claim_cases"
CLAIMS = load_claims()


def _cases() -> dict[str, dict]:
    cases: dict[str, dict] = {}
    for paper in PAPERS:
        path = CASES_DIR / f"{paper}.yaml"
        if path.exists():
            cases |= yaml.safe_load(path.read_text()) or {}
    return cases


CASES = _cases()


def _filled(value, params: dict[str, str]):
    if isinstance(value, str):
        return value.format(**params)
    if isinstance(value, list):
        return [_filled(item, params) for item in value]
    if isinstance(value, dict):
        return {key: _filled(item, params) for key, item in value.items()}
    return value


def cases_of(claim: Claim) -> dict:
    """The claim's cases, by its own id or, for a templated claim, by its registry id."""
    if claim.claim in CASES:
        return CASES[claim.claim]
    params = dict(claim.params)
    return _filled(CASES.get(claim.template, {}), params)


def judge_on(claim: Claim, views: dict[str, list[dict]]) -> pl.DataFrame:
    """The claim's judge on `views`' rows, each view a table of its name in a fresh database."""
    with duckdb.connect(":memory:") as conn:
        for view, rows in views.items():
            frame = pl.DataFrame(rows, infer_schema_length=None)
            conn.register("case_rows", frame.to_arrow())
            conn.execute(f"CREATE TABLE {view} AS SELECT * FROM case_rows")
            conn.unregister("case_rows")
        return conn.execute(claim.judge).pl()


@pytest.mark.parametrize("claim", CLAIMS, ids=[claim.claim for claim in CLAIMS])
def test_every_claim_has_a_case_that_holds_and_one_that_fails(claim: Claim) -> None:
    cases = cases_of(claim)
    assert {"holds", "fails"} <= set(cases), f"{claim.claim}: tests/views/claim_cases/{claim.paper}.yaml needs both"


CASE_PARAMS = [
    (claim, verdict) for claim in CLAIMS for verdict in VERDICTS if verdict != "missing" and verdict in cases_of(claim)
]


@pytest.mark.parametrize("claim,verdict", CASE_PARAMS, ids=[f"{claim.claim}-{case}" for claim, case in CASE_PARAMS])
def test_claim_judged_on_hand_made_rows(claim: Claim, verdict: str) -> None:
    case = cases_of(claim)[verdict]
    judged = judge_on(claim, case["views"])
    assert judged.columns[: len(JUDGE_COLUMNS)] == list(JUDGE_COLUMNS) or set(JUDGE_COLUMNS) <= set(judged.columns)
    assert judged.height == 1, judged
    row = judged.row(0, named=True)
    assert row["verdict"] == verdict, row["reason"]
    if case["value"] is None:  # a claim the model cannot have has no value of its own
        assert row["value"] is None, row["reason"]
    else:
        assert row["value"] == pytest.approx(float(case["value"]), abs=1e-6), row["reason"]
    assert row["reason"], "a judgment says what it compared"


def test_the_registry_has_at_least_35_claims_each_with_its_paper_sentence() -> None:
    assert len(CLAIMS) >= 35
    for claim in CLAIMS:
        assert claim.quote and claim.paper_text and claim.needs


def test_a_model_without_rows_is_missing_with_what_it_needs() -> None:
    conn = duckdb.connect(":memory:")
    apply_views(conn)
    conn.execute(
        "INSERT INTO models (model_id, source, resolved_path, n_layers, n_heads, takes_token_types, registered_at) "
        "VALUES ('m', 'org/m', '/m', 6, 12, true, now())"
    )
    card = conn.execute("SELECT claim, verdict, reason, profile FROM reproduction_scorecard").pl()
    assert card.height == len(CLAIMS)
    assert set(card["verdict"]) == {"missing"}
    assert set(card["profile"]) == {"run"}
    needs = dict(zip(card["claim"], card["reason"]))
    wiki = "attention facts on wiki_segments (attn-warehouse run --corpus wiki_segments)"
    assert needs["clark_sep_layers_6_10"] == f"needs {wiki}"
