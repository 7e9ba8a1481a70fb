"""Every claim of sql/claims judged on hand-made rows: for each claim, tests/views/claim_cases/<paper>.yaml
gives the rows of the views its judge reads for a case where the claim holds, one where it
fails and one where the evidence is inconclusive (or `no_inconclusive`: why the claim cannot be,
e.g. its value rests on one unit), and, where the judge can say it, one that is not comparable,
with the value the judge must return, computed by hand, and where the interval is known by hand
(every resample alike), the interval. The rows stand in for the views as tables of the same name, so a judge
is checked on exactly the rows written here. A case may be written once for a templated claim
(its registry id with {names}), its strings filled from each claim's `each` item."""

from pathlib import Path

import duckdb
import numpy as np
import polars as pl
import pytest
import yaml

from dagster_project.storage.claims import JUDGE_COLUMNS, PAPERS, VERDICTS, Claim, bootstrap_judge, load_claims
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
def test_every_claim_has_a_case_that_holds_one_that_fails_and_one_inconclusive(claim: Claim) -> None:
    cases = cases_of(claim)
    needed = {"holds", "fails"} | ({"inconclusive"} if "no_inconclusive" not in cases else set())
    assert needed <= set(cases), f"{claim.claim}: tests/views/claim_cases/{claim.paper}.yaml needs {sorted(needed)}"


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
    if verdict in ("holds", "fails", "inconclusive") and row["n"] > 1:  # a sample has an interval
        assert row["value_low"] <= row["value_high"], row["reason"]
        assert "interval" in row["reason"], row["reason"]
    if "interval" in case:
        assert [row["value_low"], row["value_high"]] == pytest.approx(case["interval"], abs=1e-6), row["reason"]


def test_the_registry_has_at_least_85_claims_each_with_its_paper_sentence() -> None:
    assert len(CLAIMS) >= 85
    for claim in CLAIMS:
        assert claim.quote and claim.paper_text and claim.needs and claim.unit


def test_the_bootstrap_interval_of_a_mean_matches_scipys_percentile_bootstrap() -> None:
    """The generated judge's interval for a mean over 200 units agrees with scipy.stats.bootstrap's
    percentile interval (an independent resampler) within the resampling error of 1,000 draws."""
    from scipy import stats

    values = np.random.default_rng(7).normal(0.5, 0.2, size=200)
    judge = bootstrap_judge(
        "SELECT model_id, corpus, unit, x FROM units_table", "avg(x)", "value > 0.43", "heads", "'mean'"
    )
    with duckdb.connect(":memory:") as conn:
        frame = pl.DataFrame({"model_id": "m", "corpus": "c", "unit": np.arange(200), "x": values})
        conn.register("units_table", frame.to_arrow())
        row = conn.execute(judge).pl().row(0, named=True)
    reference = stats.bootstrap(
        (values,), np.mean, n_resamples=20_000, method="percentile", random_state=np.random.default_rng(0)
    ).confidence_interval
    standard_error = values.std(ddof=1) / np.sqrt(200)  # 0.012: the interval ends agree to a fraction of it
    assert row["value"] == pytest.approx(values.mean())
    assert row["value_low"] == pytest.approx(reference.low, abs=0.15 * standard_error)
    assert row["value_high"] == pytest.approx(reference.high, abs=0.15 * standard_error)
    assert row["n"] == 200
    # the mean, 0.474, is 3.5 standard errors above 0.43: (almost) every resample holds
    assert row["verdict"] == "holds"


def test_a_statistic_whose_resamples_disagree_is_inconclusive_and_one_unit_has_no_interval() -> None:
    judge = bootstrap_judge(
        "SELECT model_id, corpus, unit, x FROM units_table", "avg(x)", "value > 0.5", "tasks", "'m'"
    )
    with duckdb.connect(":memory:") as conn:
        # two units, 0.2 and 1.0: the mean 0.6 holds, but a quarter of the resamples draw 0.2 twice
        conn.register("units_table", pl.DataFrame({"model_id": "m", "corpus": "c", "unit": [1, 2], "x": [0.2, 1.0]}))
        row = conn.execute(judge).pl().row(0, named=True)
        assert (row["verdict"], row["value"], row["value_low"], row["value_high"]) == ("inconclusive", 0.6, 0.2, 1.0)
        conn.register("units_table", pl.DataFrame({"model_id": "m", "corpus": "c", "unit": [1], "x": [0.6]}))
        row = conn.execute(judge).pl().row(0, named=True)
        assert (row["verdict"], row["value_low"], row["value_high"]) == ("holds", None, None)
        assert row["reason"] == "m; rests on a single unit, no interval"


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
