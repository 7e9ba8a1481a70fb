"""The bootstrap over examples: the matrix form (draw counts @ per-example sums) against a plain
loop over the same resamples, and the ratios of sums against hand-computed means."""

import numpy as np
import polars as pl
import pytest

from dagster_project.compute.bootstrap import (
    ratio_intervals,
    resample_counts,
    resample_indices,
    summarize_units,
)

# per (head, example): hits and items; head 2 has no row for example 3 (the example lacks the feature)
UNITS = pl.DataFrame(
    {
        "head": [1, 1, 1, 1, 2, 2, 2],
        "example_id": [10, 11, 12, 13, 10, 11, 12],
        "accuracy_num": [1.0, 0.0, 3.0, 2.0, 2.0, 2.0, 0.0],
        "accuracy_den": [2.0, 1.0, 4.0, 2.0, 2.0, 3.0, 1.0],
        "links_total": [1, 2, 3, 4, 5, 6, 7],
    }
)


def _loop_bootstrap(units: pl.DataFrame, head: int, n_resamples: int, seed: int) -> tuple[float, float]:
    """The textbook bootstrap: per resample, the drawn examples' rows, summed, then the ratio."""
    examples = units["example_id"].unique().sort().to_list()
    rows = {row["example_id"]: row for row in units.filter(pl.col("head") == head).iter_rows(named=True)}
    ratios = []
    for drawn in resample_indices(len(examples), n_resamples, seed):
        num = sum(rows[examples[i]]["accuracy_num"] for i in drawn if examples[i] in rows)
        den = sum(rows[examples[i]]["accuracy_den"] for i in drawn if examples[i] in rows)
        if den > 0:
            ratios.append(num / den)
    return tuple(np.quantile(ratios, [0.025, 0.975]))


def test_counts_are_the_draws_of_each_resample():
    indices = np.array([[0, 0, 2], [1, 2, 1]])
    assert resample_counts(indices, 3).tolist() == [[2, 0, 1], [0, 2, 1]]
    # the same seed draws the same resamples
    assert (resample_indices(5, 3, seed=7) == resample_indices(5, 3, seed=7)).all()


def test_matrix_bootstrap_equals_a_loop_over_the_same_resamples():
    summary = summarize_units(UNITS, n_resamples=200, seed=3).sort("head")
    for head in (1, 2):
        row = summary.filter(pl.col("head") == head).row(0, named=True)
        assert (row["accuracy_ci_low"], row["accuracy_ci_high"]) == pytest.approx(
            _loop_bootstrap(UNITS, head, 200, 3), abs=1e-12
        )
    # ratios of sums over all examples, the denominators' sums, and totals
    assert summary["accuracy"].to_list() == pytest.approx([6 / 9, 4 / 6])
    assert summary["accuracy_n"].to_list() == [9.0, 6.0]
    assert summary["n_examples"].to_list() == [4, 3]
    assert summary["links"].to_list() == [10.0, 18.0]
    assert (summary["accuracy_ci_low"] <= summary["accuracy"]).all()
    assert (summary["accuracy"] <= summary["accuracy_ci_high"]).all()


def test_a_group_without_denominator_has_no_value_nor_interval():
    low, high = ratio_intervals(np.array([[1.0, 0.0]]), np.array([[1.0, 0.0]]), np.ones((4, 1)))
    assert low[0] == high[0] == 1.0 and np.isnan(low[1]) and np.isnan(high[1])
    units = UNITS.with_columns(accuracy_den=pl.when(pl.col("head") == 2).then(0.0).otherwise("accuracy_den"))
    row = summarize_units(units, n_resamples=20).filter(pl.col("head") == 2).row(0, named=True)
    assert row["accuracy"] is None and row["accuracy_ci_low"] is None and row["accuracy_ci_high"] is None


def test_an_example_with_a_constant_value_gives_a_zero_width_interval():
    units = pl.DataFrame({"example_id": [0, 1, 2], "x_num": [0.5, 0.5, 0.5], "x_den": [1.0, 1.0, 1.0]})
    row = summarize_units(units, n_resamples=50).row(0, named=True)
    assert row["x"] == row["x_ci_low"] == row["x_ci_high"] == pytest.approx(0.5)
    assert row["n_examples"] == 3


def test_the_intervals_do_not_depend_on_the_order_of_the_rows():
    shuffled = UNITS.sample(fraction=1.0, shuffle=True, seed=5)
    assert shuffled["example_id"].to_list() != UNITS["example_id"].to_list()
    assert (
        summarize_units(shuffled, n_resamples=100)
        .sort("head")
        .equals(summarize_units(UNITS, n_resamples=100).sort("head"))
    )
