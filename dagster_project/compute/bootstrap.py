"""Seeded percentile bootstrap over examples for ratio-of-sums aggregates.

Every averaging result is a ratio of sums over examples: sum_e num[e, g] / sum_e den[e, g] per
group g (a plain mean: num = value, den = 1; a token-weighted mean: num = value * tokens, den =
tokens; an accuracy: num = hits, den = items). A resample draws the partition's examples with
replacement; drawn k times, an example adds k times its sums. So with the resamples' draw counts
as a (resamples x examples) matrix C, one matrix product gives every resample's sums of every
group at once: C @ num and C @ den.
"""

import numpy as np
import polars as pl

N_RESAMPLES = 1000
SEED = 0
LEVEL = 0.95
NUMERATOR, DENOMINATOR = "_num", "_den"  # suffixes of a measure's per-example sums in a units frame
TOTAL = "_total"  # suffix of a per-example count that is only summed (no interval)
UNIT = "example_id"


def resample_indices(n_units: int, n_resamples: int = N_RESAMPLES, seed: int = SEED) -> np.ndarray:
    """(n_resamples, n_units) indices of the units each resample draws (with replacement)."""
    return np.random.default_rng(seed).integers(0, n_units, size=(n_resamples, n_units))


def resample_counts(indices: np.ndarray, n_units: int) -> np.ndarray:
    """How often each resample (row of `indices`) drew each unit: (n_resamples, n_units)."""
    n_resamples = indices.shape[0]
    flat = (indices + n_units * np.arange(n_resamples)[:, None]).ravel()
    return np.bincount(flat, minlength=n_resamples * n_units).reshape(n_resamples, n_units).astype(np.float64)


def ratio_intervals(
    numerators: np.ndarray, denominators: np.ndarray, counts: np.ndarray, level: float = LEVEL
) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval of sum(num) / sum(den) per group (columns of the (units x groups)
    matrices) over the resamples of `counts`. A resample whose denominator is 0 (it drew no
    unit of the group) has no ratio and is left out; a group with none gets NaN."""
    resampled = (counts @ numerators) / np.where((sums := counts @ denominators) == 0, np.nan, sums)
    tail = (1 - level) / 2
    valid = ~np.isnan(resampled).all(axis=0)
    low, high = np.full(numerators.shape[1], np.nan), np.full(numerators.shape[1], np.nan)
    if valid.any():
        low[valid], high[valid] = np.nanquantile(resampled[:, valid], [tail, 1 - tail], axis=0)
    return low, high


def measures_of(units: pl.DataFrame) -> list[str]:
    """The measures a units frame holds sums for: the names of its `m_num` columns, without the suffix."""
    return [column.removesuffix(NUMERATOR) for column in units.columns if column.endswith(NUMERATOR)]


def summarize_units(
    units: pl.DataFrame, n_resamples: int = N_RESAMPLES, seed: int = SEED, level: float = LEVEL
) -> pl.DataFrame:
    """Per group, each measure's ratio of sums with its bootstrap interval over the examples.

    `units` has one row per (group, example): the group's key columns, `example_id`, and per
    measure m its example's sums `m_num` and `m_den` (plus `c_total` columns, only summed). Gives
    per group (keys in order of first appearance): the keys, `n_examples` (its rows), per measure
    `m` (NULL where sum(m_den) is 0), `m_ci_low`, `m_ci_high` and `m_n` = sum(m_den), and per total
    `c`. All groups resample the same examples (the partition's, by sorted example_id), with one seed.
    """
    measures = measures_of(units)
    totals = [column for column in units.columns if column.endswith(TOTAL)]
    sums = [f"{m}{suffix}" for m in measures for suffix in (NUMERATOR, DENOMINATOR)]
    keys = [column for column in units.columns if column not in {UNIT, *sums, *totals}]
    # examples numbered in sorted order, so the seeded resamples do not depend on the rows' order
    examples = units.select(UNIT).unique().sort(UNIT).with_row_index("_unit")
    groups = units.select(keys).unique(maintain_order=True).with_row_index("_group") if keys else None
    indexed = units.join(examples, on=UNIT, how="left")
    if groups is not None:
        indexed = indexed.join(groups, on=keys, how="left", nulls_equal=True)
    else:
        indexed = indexed.with_columns(_group=pl.lit(0, pl.UInt32))
    n_units, n_groups = examples.height, groups.height if groups is not None else 1
    group_index, unit_index = indexed["_group"].to_numpy(), indexed["_unit"].to_numpy()
    counts = resample_counts(resample_indices(n_units, n_resamples, seed), n_units)

    def by_group(column: str) -> np.ndarray:
        """(units x groups) matrix of a per-example column; 0 where the example has no row of the group."""
        matrix = np.zeros((n_units, n_groups))
        matrix[unit_index, group_index] = indexed[column].cast(pl.Float64).fill_null(0.0).to_numpy()
        return matrix

    result: dict[str, np.ndarray] = {"n_examples": np.bincount(group_index, minlength=n_groups)}
    for m in measures:
        numerators, denominators = by_group(f"{m}{NUMERATOR}"), by_group(f"{m}{DENOMINATOR}")
        num, den = numerators.sum(axis=0), denominators.sum(axis=0)
        low, high = ratio_intervals(numerators, denominators, counts, level)
        result |= {m: num / np.where(den == 0, np.nan, den), f"{m}_ci_low": low, f"{m}_ci_high": high, f"{m}_n": den}
    for column in totals:
        result[column.removesuffix(TOTAL)] = by_group(column).sum(axis=0)
    frame = pl.DataFrame(result).with_columns(
        pl.col(m).fill_nan(None).alias(m) for m in measures for m in (m, f"{m}_ci_low", f"{m}_ci_high")
    )
    return pl.concat([groups.drop("_group"), frame], how="horizontal") if groups is not None else frame
