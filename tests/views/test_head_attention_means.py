"""Clark Fig. 2, Fig. 4 and §3.1 corpus means (docs/methods.md §3.1): the mean of per-example
means by default (each example weighs the same, as Clark's released code), the token-weighted
mean as int_head_attention_means' rows with mean_over = 'tokens'."""

import math

import duckdb
import polars as pl
import pytest

from dagster_project.compute.models import ModelSpec
from dagster_project.storage.model_rows import upsert_model
from dagster_project.storage.partition_writes import replace_partition

SPEC = ModelSpec("org--m", "org/m", "/x", "r1", "bert", 1, 2, True)

# two examples of different lengths: 2 and 6 query rows
N_TOKENS = [2, 6]
TO_SEP = [0.5, 0.1]  # per example 0.3; per token (0.5 * 2 + 0.1 * 6) / 8 = 0.2
ENTROPY = [0.4, 1.2]  # per example 0.8; per token (0.4 * 2 + 1.2 * 6) / 8 = 1.0
SEP_TO_SEP = [0.9, 0.5]  # one value per example: 0.7 under both
CLS_ENTROPY = [0.2, 0.6]  # one value per example: 0.4 under both


def _summaries() -> pl.DataFrame:
    """Head 1-1 with the values above; head 1-2 the same on both examples (0.25 under both)."""
    return pl.DataFrame(
        {
            "example_id": [0, 0, 1, 1],
            "layer": [1, 1, 1, 1],
            "head": [1, 2, 1, 2],
            "n_tokens": [N_TOKENS[0]] * 2 + [N_TOKENS[1]] * 2,
            "to_cls": [0.1, 0.25, 0.3, 0.25],
            "to_sep": [TO_SEP[0], 0.25, TO_SEP[1], 0.25],
            "to_prev": [0.5, 0.0, 0.9, 0.0],
            "sep_to_sep": [SEP_TO_SEP[0], 0.0, SEP_TO_SEP[1], 0.0],
            "entropy": [ENTROPY[0], 0.0, ENTROPY[1], 0.0],
            "cls_entropy": [CLS_ENTROPY[0], 0.0, CLS_ENTROPY[1], 0.0],
        },
        schema_overrides={"layer": pl.Int16, "head": pl.Int16, "n_tokens": pl.Int16},
    )


@pytest.fixture
def written(conn: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    upsert_model(conn, SPEC)
    replace_partition(conn, {"head_summaries": _summaries()}, SPEC.model_id, "demo")
    return conn


def test_results_views_show_the_mean_of_per_example_means(written: duckdb.DuckDBPyConnection) -> None:
    rows = written.execute(
        "SELECT head, mean_over, to_sep, to_cls, sep_to_sep, n_examples, to_sep_ci_low, to_sep_ci_high "
        "FROM clark_special_tokens ORDER BY head"
    ).fetchall()
    assert [row[:6] for row in rows] == [
        (1, "examples", pytest.approx(0.3), pytest.approx(0.2), pytest.approx(0.7), 2),
        (2, "examples", pytest.approx(0.25), pytest.approx(0.25), pytest.approx(0.0), 2),
    ]
    _, _, to_sep, _, _, _, low, high = rows[0]
    assert min(TO_SEP) <= low <= to_sep <= high <= max(TO_SEP)
    assert written.execute(
        "SELECT mean_over, entropy, cls_entropy, uniform_entropy FROM clark_entropy WHERE head = 1"
    ).fetchall() == [
        ("examples", pytest.approx(0.8), pytest.approx(0.4), pytest.approx((math.log(2) + math.log(6)) / 2)),
    ]
    assert written.execute(
        "SELECT mean_over, to_prev, mostly_previous FROM clark_relative_position WHERE head = 1"
    ).fetchall() == [("examples", pytest.approx(0.7), True)]
    assert written.execute("SELECT head, mean_over FROM int_head_behaviours ORDER BY head").fetchall() == [
        (1, "examples"),
        (2, "examples"),
    ]


def test_int_head_attention_means_has_the_token_weighted_rows(written: duckdb.DuckDBPyConnection) -> None:
    rows = {
        row[0]: row[1:]
        for row in written.execute(
            "SELECT mean_over, to_sep, entropy, sep_to_sep, cls_entropy, uniform_entropy, n_queries, n_examples "
            "FROM int_head_attention_means WHERE head = 1"
        ).fetchall()
    }
    log2, log6 = math.log(2), math.log(6)
    assert rows == {
        "examples": pytest.approx((0.3, 0.8, 0.7, 0.4, (log2 + log6) / 2, 8, 2)),
        "tokens": pytest.approx((0.2, 1.0, 0.7, 0.4, (2 * log2 + 6 * log6) / 8, 8, 2)),
    }
    # each weighting's denominator: examples with a value, or their query rows
    assert dict(
        written.execute("SELECT mean_over, to_sep_n FROM agg_head_attention_means WHERE head = 1").fetchall()
    ) == {"examples": 2.0, "tokens": 8.0}


def test_head_ablation_joins_one_row_per_head(written: duckdb.DuckDBPyConnection) -> None:
    scores = pl.DataFrame(
        {
            "task": ["rte"] * 2,
            "tuned_model_id": [SPEC.model_id] * 2,
            "kind": ["head"] * 2,
            "layer": [1, 1],
            "head": [1, 2],
            "metric": ["accuracy"] * 2,
            "score": [0.55, 0.6],
            "baseline_score": [0.6] * 2,
            "n_examples": [277] * 2,
        },
        schema_overrides={"layer": pl.Int16, "head": pl.Int16, "n_examples": pl.Int32},
    )
    replace_partition(written, {"ablation_scores": scores}, SPEC.model_id, "demo")
    assert written.execute(
        "SELECT head, to_sep, entropy, mean_over FROM kovaleva_head_ablation ORDER BY head"
    ).fetchall() == [(1, pytest.approx(0.3), pytest.approx(0.8), "examples"), (2, pytest.approx(0.25), 0.0, "examples")]
