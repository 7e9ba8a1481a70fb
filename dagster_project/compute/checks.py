"""Checks on fact frames before they are written: pure functions, each returning whether
the facts hold and the figures that say so. The assets attach them as asset checks."""

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import polars as pl

from dagster_project.compute.weightings import AGGREGATIONS

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
    return CheckOutcome(
        "rows_sum_to_one", error <= ROW_SUM_TOLERANCE, "Every attention row sums to 1.", {"max_row_sum_error": error}
    )


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
        {
            "heads_checked": totals.height,
            "heads_with_wrong_pair_count": wrong_pairs,
            "max_relative_mass_error": relative,
        },
    )


def finite(frame: pl.DataFrame, columns: list[str], name: str = "finite_values") -> CheckOutcome:
    """No NaN or infinity in the given float columns (and at least one row)."""
    bad = {column: int((~frame[column].is_finite()).sum()) for column in columns}
    return CheckOutcome(
        name,
        frame.height > 0 and sum(bad.values()) == 0,
        f"No NaN or inf in {', '.join(columns)}.",
        {f"non_finite_{c}": n for c, n in bad.items()},
    )


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


def example_maps_whole(maps: pl.DataFrame, lengths: pl.DataFrame, examples: list[int], heads: int) -> CheckOutcome:
    """The kept whole maps (head_example_maps) are those of `examples`, each head's map has n rows
    (queries 0..n-1) of n keys, n the example's length, and every row sums to 1.

    lengths: example_id, n_tokens.
    """
    n = pl.col("n_tokens").cast(pl.Int64)
    rows = maps.select(
        "example_id",
        "layer",
        "head",
        "query",
        keys=pl.col("attention").list.len(),
        error=(pl.col("attention").list.sum() - 1).abs(),
    ).join(lengths, on="example_id", how="left")
    wrong_rows = rows.filter(~((pl.col("keys") == n) & pl.col("query").is_between(0, n - 1)).fill_null(False)).height
    per_example = rows.group_by("example_id").agg(rows=pl.len(), n=n.first())
    incomplete = per_example.filter(pl.col("rows") != pl.col("n") * heads).height
    error = float(rows["error"].fill_nan(float("inf")).max() or 0.0)
    kept = sorted(per_example["example_id"])
    return CheckOutcome(
        "example_maps_whole",
        kept == sorted(examples) and wrong_rows == 0 and incomplete == 0 and error <= ROW_SUM_TOLERANCE,
        "The kept maps are the corpus's first examples' (example_id order), n rows of n keys per head, "
        "every row summing to 1.",
        {
            "examples": ", ".join(map(str, kept)),
            "expected_examples": ", ".join(map(str, sorted(examples))),
            "rows": rows.height,
            "rows_of_wrong_length": wrong_rows,
            "examples_missing_rows": incomplete,
            "max_row_sum_error": error,
        },
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
    outside = (
        hits.join(real.rename({"word_index": "target_word"}), on=["example_id", "target_word"], how="anti").height
        + hits.filter(pl.col("target_word") == pl.col("word_index")).height
    )
    counts = hits.group_by("example_id", "word_index").len()
    complete = counts.height == real.height and bool((counts["len"] == per_word).all())
    return CheckOutcome(
        "relation_hit_targets",
        outside == 0 and complete,
        "Relation-hit targets are other words of the same example; one hit per word, layer and head.",
        {
            "hits": hits.height,
            "targets_outside_example": outside,
            "words_with_hits": counts.height,
            "words_with_pieces": real.height,
        },
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
    outside = (
        0
        if links.is_empty()
        else links.filter(~pl.col("max_attention").is_between(0.0, 1.0 + ROW_SUM_TOLERANCE)).height
    )
    return CheckOutcome(
        "frame_link_bounds",
        links.height > 0 and outside == 0,
        "Every frame link has a finite max attention in [0, 1] per (layer, head).",
        {"rows": links.height, "rows_outside_0_1": outside},
    )


def tokens_match_examples(examples: pl.DataFrame, tokens: pl.DataFrame) -> CheckOutcome:
    """Every example's pieces are positions 0..n-1, n == examples.n_tokens <= max_len, and
    every piece belongs to an example (and there is at least one example)."""
    pieces = tokens.group_by("example_id").agg(
        count=pl.len(),
        distinct=pl.col("position").n_unique(),
        first=pl.col("position").min(),
        last=pl.col("position").max(),
    )
    joined = examples.select("example_id", "n_tokens", "max_len").join(
        pieces, on="example_id", how="full", coalesce=True
    )
    n = pl.col("n_tokens").cast(pl.Int64)
    whole = (
        (pl.col("count") == n)
        & (pl.col("distinct") == n)
        & (pl.col("first") == 0)
        & (pl.col("last") == n - 1)
        & (n <= pl.col("max_len"))
    )
    wrong = joined.filter(~whole.fill_null(False)).height
    return CheckOutcome(
        "tokens_match_examples",
        examples.height > 0 and wrong == 0,
        "Each example's tokens are positions 0..n-1 with n = examples.n_tokens <= max_len.",
        {"examples": examples.height, "examples_with_wrong_tokens": wrong},
    )


def word_pieces_inside_example(words: pl.DataFrame, examples: pl.DataFrame) -> CheckOutcome:
    """Every word belongs to an example and its pieces [piece_start, piece_end), when it has
    any, are a non-empty span inside that example's tokens."""
    start, end = pl.col("piece_start"), pl.col("piece_end")
    inside = pl.col("n_tokens").is_not_null() & (
        start.is_null() | ((start >= 0) & (start < end) & (end <= pl.col("n_tokens")))
    )
    outside = (
        words.join(examples.select("example_id", "n_tokens"), on="example_id", how="left")
        .filter(~inside.fill_null(False))
        .height
    )
    return CheckOutcome(
        "word_pieces_inside_example",
        outside == 0,
        "Every word's [piece_start, piece_end) lies inside its example's tokens.",
        {"words": words.height, "words_outside_example": outside},
    )


def grad_sums_valid(rows: pl.DataFrame) -> CheckOutcome:
    """Gradient sums are finite and >= 0 (sums of |gradient|) over weight counts > 0; no rows
    (a model without a loss head) is valid."""
    bad = rows.filter(
        ~(pl.col("grad_sum").is_finite() & (pl.col("grad_sum") >= 0) & (pl.col("weight_count") > 0))
    ).height
    return CheckOutcome(
        "grad_sums_valid",
        bad == 0,
        "Gradient sums are finite and non-negative, each over a positive weight count.",
        {"rows": rows.height, "invalid_rows": bad},
    )


def probe_scores_complete(scores: pl.DataFrame, expected: list[str]) -> CheckOutcome:
    """One score per expected probe, each UAS in [0, 1]."""
    outside = scores.filter(~pl.col("uas").is_between(0.0, 1.0)).height
    found = sorted(scores["probe"])
    return CheckOutcome(
        "probe_scores_complete",
        found == sorted(expected) and outside == 0,
        "One score per expected probe, with UAS in [0, 1].",
        {"probes": ", ".join(found), "expected": ", ".join(sorted(expected)), "uas_outside_0_1": outside},
    )


def antecedents_precede_mentions(predictions: pl.DataFrame, mentions: pl.DataFrame) -> CheckOutcome:
    """Every predicted antecedent is a mention of the same example that ends before the
    predicted-for mention starts."""
    spans = mentions.select("example_id", "mention_id", "word_start", "word_end")
    joined = predictions.join(spans, on=["example_id", "mention_id"], how="left").join(
        spans.rename({"mention_id": "antecedent_id", "word_start": "antecedent_start", "word_end": "antecedent_end"}),
        on=["example_id", "antecedent_id"],
        how="left",
    )
    wrong = joined.filter(~(pl.col("antecedent_end") <= pl.col("word_start")).fill_null(False)).height
    return CheckOutcome(
        "antecedents_precede_mentions",
        wrong == 0,
        "Each predicted antecedent is an earlier mention (ending before the mention starts) of the same example.",
        {"predictions": predictions.height, "antecedents_not_earlier": wrong},
    )


def one_row_per_head(frame: pl.DataFrame, n_layers: int, n_heads: int) -> CheckOutcome:
    """Exactly the (layer, head) pairs 1..n_layers x 1..n_heads, each once."""
    in_grid = frame.filter(pl.col("layer").is_between(1, n_layers) & pl.col("head").is_between(1, n_heads))
    distinct = in_grid.select("layer", "head").n_unique()
    return CheckOutcome(
        "one_row_per_head",
        frame.height == in_grid.height == distinct == n_layers * n_heads,
        "One row per (layer, head) of the model.",
        {"rows": frame.height, "distinct_heads_in_grid": distinct, "heads": n_layers * n_heads},
    )


CORRELATION_METRICS = ("pearson", "spearman")


def scores_in_range(scores: pl.DataFrame) -> CheckOutcome:
    """Every defined score lies in [-1, 1] (accuracy, F1, Matthews, correlations); a score is
    undefined (NaN or null) only for a correlation (a constant prediction has none)."""
    undefined = pl.col("score").is_null() | pl.col("score").is_nan()
    outside = scores.filter(~undefined & ~pl.col("score").is_between(-1.0, 1.0)).height
    undefined_not_correlation = scores.filter(undefined & ~pl.col("metric").is_in(CORRELATION_METRICS)).height
    return CheckOutcome(
        "scores_in_range",
        scores.height > 0 and outside == 0 and undefined_not_correlation == 0,
        "Scores are finite and in [-1, 1]; undefined only for correlations of a constant prediction.",
        {
            "rows": scores.height,
            "scores_outside_range": outside,
            "undefined_correlations": scores.filter(undefined).height - undefined_not_correlation,
            "undefined_other_scores": undefined_not_correlation,
        },
    )


def ablation_settings_complete(ablations: pl.DataFrame, n_layers: int, n_heads: int) -> CheckOutcome:
    """One baseline, one setting per (layer, head) and one per layer, each with every metric."""
    settings = ablations.select("kind", "layer", "head").unique()
    found = dict(settings.group_by("kind").len().iter_rows())
    expected = {"baseline": 1, "head": n_layers * n_heads, "layer": n_layers}
    per_metric = ablations.height == settings.height * ablations["metric"].n_unique()
    return CheckOutcome(
        "ablation_settings_complete",
        found == expected and per_metric,
        "One ablation row per metric for the baseline, every head and every layer.",
        {
            "rows": ablations.height,
            **{f"{kind}_settings": found.get(kind, 0) for kind in expected},
            "expected_head_settings": expected["head"],
        },
    )


COSINE_TOLERANCE = 1e-5


def cosines_in_range(cosines: pl.DataFrame) -> CheckOutcome:
    """Every cosine is finite and within [-1, 1] up to float error (and there is one)."""
    bounded = pl.col("cosine").is_between(-1 - COSINE_TOLERANCE, 1 + COSINE_TOLERANCE)
    outside = cosines.filter(~(pl.col("cosine").is_finite() & bounded)).height
    return CheckOutcome(
        "cosines_in_range",
        cosines.height > 0 and outside == 0,
        f"Every cosine is finite and within [-1, 1] (+/- {COSINE_TOLERANCE}).",
        {"rows": cosines.height, "cosines_outside_range": outside},
    )


# The estimator check's documented minimum sample: on fewer exact examples (of more written), each
# published gap is judged by its one-sided 95% upper bound, gap + CHECK_CONFIDENCE_Z x its jackknife
# standard error over the examples; from this many on, or where the check saw every written example,
# by the gap itself.
CHECK_MIN_EXAMPLES = 16
CHECK_CONFIDENCE_Z = 1.645


def _check_confidence(examples: int, written: int) -> str:
    """How the estimator check judges a gap on `examples` exact examples of `written`."""
    if examples >= written:
        return f"the gap itself: the check saw every one of the {written} written examples"
    if examples >= CHECK_MIN_EXAMPLES:
        return f"the gap itself: {examples} examples >= the documented minimum {CHECK_MIN_EXAMPLES}"
    if examples < 2:
        return (
            f"no verdict: {examples} example of {written} gives no standard error, and fewer than "
            f"{CHECK_MIN_EXAMPLES} need one (an estimator misses)"
        )
    return (
        f"one-sided 95% upper bound, gap + {CHECK_CONFIDENCE_Z} x its jackknife standard error over "
        f"{examples} examples (< {CHECK_MIN_EXAMPLES} of {written} written)"
    )


def estimate_matches_exact(
    layer_pearson: dict[int, float],
    mean_abs_error: float,
    min_pearson: float,
    method: str,
    examples: list[int],
    published_gaps: Mapping[str, Mapping[int, float]] | None = None,
    tolerances: Mapping[str, float] | None = None,
    gap_errors: Mapping[str, Mapping[int, float]] | None = None,
    written: int | None = None,
) -> CheckOutcome:
    """The HTA estimator's input contributions track exact HTA on every layer it estimates: the
    worst per-layer Pearson (layer 1 is exact in every mode and not scored) is >= min_pearson,
    and every published quantity's gap from exact (`published_gaps`: quantity -> layer -> gap) is
    within its tolerance on every layer. Exact HTA (no estimated layer) passes with nothing to score.

    `written`: the examples the run writes (None: the check's own). Where the check saw fewer than
    CHECK_MIN_EXAMPLES of more written, each gap is judged by its upper bound gap + CHECK_CONFIDENCE_Z x
    its standard error (`gap_errors`, same keys; NaN or missing: a miss, as one example gives none)."""
    published_gaps, tolerances, gap_errors = published_gaps or {}, tolerances or {}, gap_errors or {}
    written = max(written or len(examples), len(examples))
    bounded = len(examples) < min(written, CHECK_MIN_EXAMPLES)
    worst_layer = min(layer_pearson, key=layer_pearson.__getitem__) if layer_pearson else None
    worst = layer_pearson[worst_layer] if worst_layer is not None else 1.0

    def judged(name: str, layer: int, gap: float) -> float:
        error = gap_errors.get(name, {}).get(layer, math.nan)
        return gap + CHECK_CONFIDENCE_Z * error if bounded else gap

    def miss(name: str, layer: int, gap: float) -> str:
        bound = judged(name, layer, gap)
        detail = f" (gap {gap:.4f} + {CHECK_CONFIDENCE_Z} x standard error)" if bounded else ""
        return f"{name} layer {layer}: {bound:.4f}{detail} > {tolerances[name]}"

    missed = [
        miss(name, layer, gap)
        for name, gaps in published_gaps.items()
        for layer, gap in sorted(gaps.items())
        if not judged(name, layer, gap) <= tolerances[name]  # NaN (a quantity the estimate lost) misses too
    ]
    return CheckOutcome(
        "estimate_matches_exact",
        worst >= min_pearson and not missed,
        f"Worst per-layer Pearson of estimated vs exact input contributions (estimated layers only) >= {min_pearson}, "
        "and per estimated layer every published quantity within its tolerance of exact HTA's (on fewer than "
        f"{CHECK_MIN_EXAMPLES} check examples of more written, its one-sided 95% upper bound).",
        {
            "worst_layer_pearson": worst,
            "worst_layer": worst_layer or 0,
            **{f"pearson_layer_{layer}": value for layer, value in sorted(layer_pearson.items())},
            "min_pearson": min_pearson,
            "mean_abs_error": mean_abs_error,
            **{
                f"{name}_gap_layer_{layer}": gap
                for name, gaps in published_gaps.items()
                for layer, gap in sorted(gaps.items())
            },
            **{
                f"{name}_gap_error_layer_{layer}": error
                for name, errors in gap_errors.items()
                for layer, error in sorted(errors.items())
            },
            **{f"{name}_tolerance": tolerance for name, tolerance in tolerances.items()},
            "published_misses": "; ".join(missed) or "none",
            "judged_on": _check_confidence(len(examples), written) if published_gaps else "nothing estimated",
            "hta_method": method,
            "examples": len(examples),
            "written_examples": written,
            "example_ids": ", ".join(map(str, examples)),
        },
    )


def correlations_in_range(correlations: pl.DataFrame, weightings: Sequence[str], n_examples: int) -> CheckOutcome:
    """One row per (example, weighting, aggregation) of the pass (none for a model without a classifier), each
    Spearman correlation null or within [-1, 1]."""
    outside = correlations.filter(pl.col("spearman").is_not_null() & ~pl.col("spearman").is_between(-1, 1)).height
    expected = n_examples * len(weightings) * len(AGGREGATIONS)
    return CheckOutcome(
        "correlations_in_range",
        correlations.height == expected and outside == 0,
        "One Spearman correlation per (example, weighting, aggregation), null or within [-1, 1].",
        {"rows": correlations.height, "expected_rows": expected, "outside_range": outside},
    )
