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


def received_sums_to_one(received: pl.DataFrame) -> CheckOutcome:
    """Per (example, layer, head): received attention (column sums / n) sums to 1 over the
    example's tokens, as does the [CLS] row (examples of models without [CLS] excepted)."""
    totals = received.group_by("example_id", "layer", "head").agg(
        received=pl.col("received").sum(), from_cls=pl.col("from_cls").sum()
    )
    received_error = float((totals["received"] - 1).abs().max() or 0.0)
    cls_error = float((totals["from_cls"].fill_nan(1.0) - 1).abs().max() or 0.0)
    return CheckOutcome(
        "received_sums_to_one",
        totals.height > 0 and received_error <= ROW_SUM_TOLERANCE and cls_error <= ROW_SUM_TOLERANCE,
        "Per example and head, received attention and the [CLS] row each sum to 1 over tokens.",
        {"heads_checked": totals.height, "max_received_sum_error": received_error, "max_cls_row_sum_error": cls_error},
    )


def frame_link_bounds(links: pl.DataFrame) -> CheckOutcome:
    """Every frame-link max attention is finite and in [0, 1] (a link whose spans had no
    pieces would give -inf), and there is at least one link."""
    outside = 0 if links.is_empty() else links.filter(~pl.col("max_attention").is_between(0.0, 1.0 + ROW_SUM_TOLERANCE)).height
    return CheckOutcome(
        "frame_link_bounds",
        links.height > 0 and outside == 0,
        "Every frame link has a finite max attention in [0, 1] per (layer, head).",
        {"rows": links.height, "rows_outside_0_1": outside},
    )
