"""scorecard_matrix on hand-made judgments: two models and two random-init controls of one (seed 0,
whose verdicts its base's rows carry, and seed 3, judged on nothing), a claim judged on two corpora
(agreeing for one model, disagreeing for another, decided by one corpus for the third), a claim no
corpus could judge, and every other claim missing. The judgments stand in
for the generated claim_judgments view, so the real reproduction_scorecard lies between them and
the matrix."""

import duckdb
import polars as pl
import pytest

from dagster_project.compute.models import ModelSpec
from dagster_project.storage.claims import JUDGMENTS_VIEW, load_claims
from dagster_project.storage.model_rows import record_reproduction, upsert_model
from dagster_project.storage.view_contracts import contract_violations, view_contracts

ALPHA = ModelSpec("org--alpha", "org/alpha", "/models/alpha", "abc", "bert", 6, 12, True)
BETA = ModelSpec("org--beta", "org/beta", "/models/beta", "abc", "bert", 12, 12, True)
# The control's model_id sorts before its base's: the view, not the id, puts it after org/alpha.
CONTROL = ModelSpec("aaa--control", "random-init:org/alpha", "/models/alpha", "abc", "bert", 6, 12, True)
SEEDED = ModelSpec("aaa--seed-3", "random-init:org/alpha@seed=3", "/models/alpha", "abc", "bert", 6, 12, True)
MODELS = ["org/alpha", "random-init:org/alpha", "random-init:org/alpha@seed=3", "org/beta"]
CLAIMS = len(load_claims())
TWO_TASKS = "kovaleva_fig8_random_head_helps_mrpc_rte"
# (claim, model_id, corpus, value, verdict, reason, n)
JUDGMENTS = [
    ("clark_sep_layers_6_10", "org--alpha", "wiki_segments", 0.62, "holds", "[SEP] 0.62", 24),
    ("clark_sep_layers_6_10", "org--beta", "wiki_segments", 0.41, "fails", "[SEP] 0.41", 24),
    ("clark_sep_layers_6_10", "aaa--control", "wiki_segments", 0.55, "holds", "[SEP] 0.55", 24),
    ("clark_sep_to_sep", "org--alpha", "wiki_segments", 0.88, "inconclusive", "0.88 [0.85, 0.93]", 24),
    ("clark_sep_to_sep", "org--beta", "wiki_segments", 0.95, "holds", "0.95", 24),
    ("clark_sep_to_sep", "aaa--control", "wiki_segments", 0.2, "fails", "0.20", 24),
    (TWO_TASKS, "org--alpha", "glue_mrpc", 0.28, "holds", "mrpc +0.28", 72),
    (TWO_TASKS, "org--alpha", "glue_rte", -0.1, "fails", "rte -0.10", 72),
    (TWO_TASKS, "org--beta", "glue_mrpc", 0.3, "holds", "mrpc +0.30", 144),
    (TWO_TASKS, "org--beta", "glue_rte", 0.2, "holds", "rte +0.20", 144),
    (TWO_TASKS, "aaa--control", "glue_mrpc", None, "not comparable", "no fine-tune beat the majority class", 0),
    (TWO_TASKS, "aaa--control", "glue_rte", 0.05, "holds", "rte +0.05", 72),
    ("pascual_fig4_other_languages", "org--beta", "xnli_de", None, "not comparable", "an English model", 0),
]
HAND_COLUMNS = ("claim", "model_id", "corpus", "value", "verdict", "reason", "n")
SHOWN = ("claim", "model", "verdict", "n_corpora", "corpora", "model_value", "n", "reason", "control_verdict")
# The cells of the judged claims, in the view's order: org/alpha, its control, org/beta; claims in registry order.
EXPECTED = [
    ("clark_sep_layers_6_10", "org/alpha", "holds", 1, "wiki_segments holds", 0.62, 24, "[SEP] 0.62", "holds"),
    ("clark_sep_to_sep", "org/alpha", "inconclusive", 1, "wiki_segments inconclusive", 0.88, 24, "0.88 [0.85, 0.93]",
     "fails"),
    (TWO_TASKS, "org/alpha", "mixed", 2, "glue_mrpc holds; glue_rte fails", None, None,
     "glue_mrpc: mrpc +0.28; glue_rte: rte -0.10", "holds"),
    ("clark_sep_layers_6_10", "random-init:org/alpha", "holds", 1, "wiki_segments holds", 0.55, 24, "[SEP] 0.55", None),
    ("clark_sep_to_sep", "random-init:org/alpha", "fails", 1, "wiki_segments fails", 0.2, 24, "0.20", None),
    # the corpus that cannot judge it does not outvote the one that did
    (TWO_TASKS, "random-init:org/alpha", "holds", 2, "glue_mrpc not comparable; glue_rte holds", 0.05, 72,
     "rte +0.05", None),
    ("clark_sep_layers_6_10", "org/beta", "fails", 1, "wiki_segments fails", 0.41, 24, "[SEP] 0.41", None),
    ("clark_sep_to_sep", "org/beta", "holds", 1, "wiki_segments holds", 0.95, 24, "0.95", None),
    (TWO_TASKS, "org/beta", "holds", 2, "glue_mrpc holds; glue_rte holds", None, None,
     "glue_mrpc: mrpc +0.30; glue_rte: rte +0.20", None),
    ("pascual_fig4_other_languages", "org/beta", "not comparable", 1, "xnli_de not comparable", None, 0,
     "an English model", None),
]  # fmt: skip


def write_matrix_warehouse(conn: duckdb.DuckDBPyConnection) -> None:
    """Register ALPHA, BETA, CONTROL and SEEDED (ALPHA's from a quick reproduction) and put JUDGMENTS
    in place of the generated judgments, every other column of that view null."""
    for spec in (ALPHA, BETA, CONTROL, SEEDED):
        upsert_model(conn, spec)
    record_reproduction(conn, ALPHA.model_id, "quick")
    columns = conn.execute(f"DESCRIBE {JUDGMENTS_VIEW}").fetchall()
    rows = pl.DataFrame(JUDGMENTS, schema=list(HAND_COLUMNS), orient="row")
    conn.register("hand_judgments", rows.to_arrow())
    conn.execute("CREATE TABLE hand_judgment_rows AS SELECT * FROM hand_judgments")
    conn.unregister("hand_judgments")
    selected = ", ".join(
        name if name in HAND_COLUMNS else f"NULL::{column_type} AS {name}" for name, column_type, *_ in columns
    )
    conn.execute(f"CREATE OR REPLACE VIEW {JUDGMENTS_VIEW} AS SELECT {selected} FROM hand_judgment_rows")


@pytest.fixture
def matrix(conn: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    write_matrix_warehouse(conn)
    return conn.execute("SELECT * FROM scorecard_matrix").pl()


def test_one_cell_per_claim_and_model_with_the_rule_for_several_corpora(matrix: pl.DataFrame) -> None:
    judged = pl.DataFrame([(claim, model_id) for claim, model_id, *_ in JUDGMENTS], ["claim", "model_id"], orient="row")
    assert matrix.join(judged, on=["claim", "model_id"], how="semi").select(SHOWN).rows() == EXPECTED


def test_every_other_claim_is_missing_with_what_it_needs(matrix: pl.DataFrame) -> None:
    assert matrix.height == 4 * CLAIMS
    assert matrix["model"].unique(maintain_order=True).to_list() == MODELS
    missing = matrix.filter(pl.col("verdict") == "missing")
    assert missing.group_by("model").len().sort("model").rows() == [
        ("org/alpha", CLAIMS - 3),
        ("org/beta", CLAIMS - 4),
        ("random-init:org/alpha", CLAIMS - 3),
        ("random-init:org/alpha@seed=3", CLAIMS),
    ]
    assert (missing["n_corpora"] == 0).all() and missing["corpora"].is_null().all()
    assert missing["reason"].str.starts_with("needs ").all()


def test_the_control_names_its_base(matrix: pl.DataFrame) -> None:
    models = matrix.select("model", "control_of", "base_model_id", "profile").unique(maintain_order=True)
    assert models.rows() == [
        ("org/alpha", None, None, "quick"),
        ("random-init:org/alpha", "org/alpha", "org--alpha", "run"),
        ("random-init:org/alpha@seed=3", "org/alpha", "org--alpha", "run"),
        ("org/beta", None, None, "run"),
    ]
    # the base's rows carry its seed-0 control's verdict on every claim, as the scorecard pairs them
    of_model = {model: rows for (model,), rows in matrix.partition_by("model", as_dict=True).items()}
    assert of_model["org/alpha"]["control_verdict"].to_list() == of_model["random-init:org/alpha"]["verdict"].to_list()
    assert matrix.filter(pl.col("model") != "org/alpha")["control_verdict"].is_null().all()


def test_the_matrix_keeps_its_contract(conn: duckdb.DuckDBPyConnection, matrix: pl.DataFrame) -> None:
    assert contract_violations(conn, view_contracts()["scorecard_matrix"]) == []
