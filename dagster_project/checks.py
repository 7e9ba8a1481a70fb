"""Checks on fact frames before they are written: pure functions, each returning whether
the facts hold and the figures that say so. The assets attach them as asset checks."""

from dataclasses import dataclass, field

import polars as pl

ROW_SUM_TOLERANCE = 1e-4


@dataclass(frozen=True)
class CheckOutcome:
    name: str
    passed: bool
    description: str
    metadata: dict[str, float | int | str] = field(default_factory=dict)


def rows_sum_to_one(head_summaries: pl.DataFrame) -> CheckOutcome:
    """Every attention row sums to 1 (the largest error of any row)."""
    error = float(head_summaries["row_sum_error"].max())
    return CheckOutcome("rows_sum_to_one", error <= ROW_SUM_TOLERANCE, "Every attention row sums to 1.", {"max_row_sum_error": error})


def histogram_masses(histograms: pl.DataFrame, lengths: pl.DataFrame, name: str, description: str) -> CheckOutcome:
    """Per (example, kind, layer, head) in scope `all`: pairs == n^2 and mass == n (rows sum to 1).

    lengths: example_id, n_tokens.
    """
    totals = (
        histograms.filter(pl.col("scope") == "all")
        .group_by("example_id", "kind", "layer", "head")
        .agg(pairs=pl.col("pair_count").sum(), mass=pl.col("weight_sum").sum())
        .join(lengths, on="example_id")
    )
    wrong_pairs = totals.filter(pl.col("pairs") != pl.col("n_tokens").cast(pl.Int64) ** 2).height
    relative = float(((totals["mass"] - totals["n_tokens"]).abs() / totals["n_tokens"]).max() or 0.0)
    return CheckOutcome(
        name,
        totals.height > 0 and wrong_pairs == 0 and relative <= ROW_SUM_TOLERANCE,
        description,
        {"heads_checked": totals.height, "heads_with_wrong_pair_count": wrong_pairs, "max_relative_mass_error": relative},
    )


def finite(frame: pl.DataFrame, columns: list[str], name: str = "finite_values") -> CheckOutcome:
    """No NaN or infinity in the given float columns (and at least one row)."""
    bad = {column: int((~frame[column].is_finite()).sum()) for column in columns}
    return CheckOutcome(name, frame.height > 0 and sum(bad.values()) == 0, f"No NaN or inf in {', '.join(columns)}.", {f"non_finite_{c}": n for c, n in bad.items()})


def rows_per_example(frame: pl.DataFrame, n_examples: int, per_example: int) -> CheckOutcome:
    """Exactly `per_example` rows for each of the examples (layers x heads)."""
    counts = frame.group_by("example_id").len()
    expected = counts.height == n_examples and bool((counts["len"] == per_example).all())
    return CheckOutcome(
        "rows_per_example",
        expected,
        "One row per (example, layer, head).",
        {"examples": counts.height, "expected_examples": n_examples, "rows_per_example": per_example},
    )


def relation_hit_targets(hits: pl.DataFrame, words: pl.DataFrame, per_word: int) -> CheckOutcome:
    """Every hit's target is another word of the same example that has pieces, and every
    word with pieces has one hit per (layer, head) (unless it is its example's only word).

    words: example_id, word_index, piece_start (null when the word has no pieces).
    """
    real = (
        words.filter(pl.col("piece_start").is_not_null())
        .select("example_id", "word_index")
        .filter(pl.len().over("example_id") > 1)
    )
    outside = hits.join(
        real.rename({"word_index": "target_word"}), on=["example_id", "target_word"], how="anti"
    ).height + hits.filter(pl.col("target_word") == pl.col("word_index")).height
    counts = hits.group_by("example_id", "word_index").len()
    complete = counts.height == real.height and bool((counts["len"] == per_word).all())
    return CheckOutcome(
        "relation_hit_targets",
        outside == 0 and complete,
        "Relation-hit targets are other words of the same example; one hit per word, layer and head.",
        {"hits": hits.height, "targets_outside_example": outside, "words_with_hits": counts.height, "words_with_pieces": real.height},
    )
