"""Fact checks on small frames that pass and frames that must fail."""

import polars as pl
import pytest

from dagster_project.compute.checks import (
    ablation_settings_complete,
    antecedents_precede_mentions,
    cosines_in_range,
    estimate_matches_exact,
    finite,
    grad_sums_valid,
    histogram_masses,
    one_row_per_head,
    probe_scores_complete,
    relation_hit_targets,
    rows_per_example,
    rows_sum_to_one,
    scores_in_range,
    tokens_match_examples,
    word_pieces_inside_example,
)


def _histogram(sums: list[float], counts: list[int]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "example_id": [0] * 3,
            "kind": ["attention"] * 3,
            "scope": ["all"] * 3,
            "layer": [1] * 3,
            "head": [1] * 3,
            "offset": [-1, 0, 1],
            "weight_sum": sums,
            "pair_count": counts,
        }
    )


def test_histograms_of_a_two_token_example():
    lengths = pl.DataFrame({"example_id": [0], "n_tokens": [2]})
    good = histogram_masses(_histogram([0.5, 1.0, 0.5], [1, 2, 1]), lengths, "h", "")
    assert good.passed and good.metadata["heads_checked"] == 1
    wrong_pairs = histogram_masses(_histogram([0.5, 1.0, 0.5], [1, 3, 1]), lengths, "h", "")
    assert not wrong_pairs.passed and wrong_pairs.metadata["heads_with_wrong_pair_count"] == 1
    wrong_mass = histogram_masses(_histogram([0.5, 1.2, 0.5], [1, 2, 1]), lengths, "h", "")
    assert not wrong_mass.passed and abs(wrong_mass.metadata["max_relative_mass_error"] - 0.1) < 1e-9
    assert not histogram_masses(_histogram([1, 1, 1], [1, 2, 1]).head(0), lengths, "h", "").passed  # nothing to check


def test_row_sums_finiteness_and_row_counts():
    summaries = pl.DataFrame(
        {
            "example_id": [0, 0, 1, 1],
            "row_sum_error": [1e-7, 2e-7, 1e-7, 3e-3],
            "entropy": [0.1, float("nan"), 0.2, 0.3],
        }
    )
    assert not rows_sum_to_one(summaries).passed
    assert rows_sum_to_one(summaries.head(3)).passed
    outcome = finite(summaries, ["entropy"])
    assert not outcome.passed and outcome.metadata["non_finite_entropy"] == 1
    assert rows_per_example(summaries, 2, 2).passed
    assert not rows_per_example(summaries, 3, 2).passed and not rows_per_example(summaries, 2, 3).passed


_WORDS = pl.DataFrame({"example_id": [0, 0, 0, 1], "word_index": [0, 1, 2, 0], "piece_start": [1, 2, None, 1]})


def _hits(targets: list[int]) -> pl.DataFrame:
    return pl.DataFrame({"example_id": [0, 0], "word_index": [0, 1], "target_word": targets})


def test_relation_hit_targets_accepts_other_words_with_pieces():
    # Word 2 has no pieces and example 1 has a single word: neither needs hits.
    outcome = relation_hit_targets(_hits([1, 0]), _WORDS, per_word=1)
    assert outcome.passed and outcome.metadata["words_with_pieces"] == 2


@pytest.mark.parametrize("targets", [[1, 1], [2, 0], [5, 0]])  # itself, a word without pieces, outside
def test_relation_hit_targets_rejects_bad_targets(targets):
    outcome = relation_hit_targets(_hits(targets), _WORDS, per_word=1)
    assert not outcome.passed and outcome.metadata["targets_outside_example"] == 1


def test_relation_hit_targets_needs_every_layer_and_head():
    assert not relation_hit_targets(_hits([1, 0]), _WORDS, per_word=2).passed


_EXAMPLES = pl.DataFrame({"example_id": [0, 1], "n_tokens": [3, 2], "max_len": [3, 3]})


def _tokens(positions: dict[int, list[int]]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "example_id": [e for e, ps in positions.items() for _ in ps],
            "position": [p for ps in positions.values() for p in ps],
        },
        schema={"example_id": pl.Int64, "position": pl.Int64},
    )


def test_tokens_match_examples():
    assert tokens_match_examples(_EXAMPLES, _tokens({0: [0, 1, 2], 1: [0, 1]})).passed
    for bad in (
        {0: [0, 1], 1: [0, 1]},
        {0: [0, 1, 1], 1: [0, 1]},
        {0: [1, 2, 3], 1: [0, 1]},
        {0: [0, 1, 2]},
        {0: [0, 1, 2], 1: [0, 1], 2: [0]},
    ):
        outcome = tokens_match_examples(_EXAMPLES, _tokens(bad))  # short, repeated, shifted, missing, orphan pieces
        assert not outcome.passed and outcome.metadata["examples_with_wrong_tokens"] == 1
    too_long = _EXAMPLES.with_columns(max_len=pl.lit(2))
    assert not tokens_match_examples(too_long, _tokens({0: [0, 1, 2], 1: [0, 1]})).passed
    assert not tokens_match_examples(_EXAMPLES.head(0), _tokens({})).passed


def _words(starts: list[int | None], ends: list[int | None], example: int = 1) -> pl.DataFrame:
    return pl.DataFrame(
        {"example_id": [0, example], "piece_start": starts, "piece_end": ends},
        schema_overrides={"piece_start": pl.Int16, "piece_end": pl.Int16},
    )


def test_word_pieces_inside_example():
    assert word_pieces_inside_example(_words([1, None], [3, None]), _EXAMPLES).passed  # a word without pieces is fine
    for bad in (
        _words([1, 1], [3, 3]),
        _words([2, 0], [2, 1]),
        _words([1, 0], [3, 1], example=5),
    ):  # past n, empty, no example
        outcome = word_pieces_inside_example(bad, _EXAMPLES)
        assert not outcome.passed and outcome.metadata["words_outside_example"] == 1


def test_grad_sums_valid_allows_no_rows():
    rows = pl.DataFrame({"grad_sum": [0.0, 2.5], "weight_count": [4, 1]})
    assert grad_sums_valid(rows).passed and grad_sums_valid(rows.head(0)).passed
    for bad in ({"grad_sum": [float("nan"), 2.5]}, {"grad_sum": [-0.1, 2.5]}, {"weight_count": [0, 1]}):
        outcome = grad_sums_valid(rows.with_columns(**{k: pl.Series(v) for k, v in bad.items()}))
        assert not outcome.passed and outcome.metadata["invalid_rows"] == 1


def test_probe_scores_complete():
    scores = pl.DataFrame({"probe": ["attn", "right_branching"], "uas": [0.6, 1.0]})
    assert probe_scores_complete(scores, ["right_branching", "attn"]).passed
    assert not probe_scores_complete(scores, ["right_branching", "attn", "attn_words"]).passed
    outcome = probe_scores_complete(
        scores.with_columns(uas=pl.Series([1.2, float("nan")])), ["right_branching", "attn"]
    )
    assert not outcome.passed and outcome.metadata["uas_outside_0_1"] == 2


def test_antecedents_precede_mentions():
    mentions = pl.DataFrame(
        {"example_id": [0, 0, 0, 1], "mention_id": [1, 2, 3, 4], "word_start": [0, 2, 3, 0], "word_end": [2, 5, 4, 1]}
    )

    def predictions(antecedents):
        return pl.DataFrame({"example_id": [0, 0], "mention_id": [2, 3], "antecedent_id": antecedents})

    assert antecedents_precede_mentions(predictions([1, 1]), mentions).passed
    for bad in ([1, 2], [3, 1], [1, 4]):  # overlapping the mention, after it, in another example
        outcome = antecedents_precede_mentions(predictions(bad), mentions)
        assert not outcome.passed and outcome.metadata["antecedents_not_earlier"] == 1


def test_one_row_per_head_and_finite_coordinates():
    heads = pl.DataFrame({"layer": [1, 1, 2, 2], "head": [1, 2, 1, 2], "x": [0.0, 1.0, -1.0, 0.5]})
    assert one_row_per_head(heads, 2, 2).passed and finite(heads, ["x"]).passed
    assert not one_row_per_head(heads, 2, 3).passed
    assert not one_row_per_head(heads.with_columns(head=pl.Series([1, 1, 1, 2])), 2, 2).passed  # a repeated head
    assert not one_row_per_head(heads.with_columns(layer=pl.Series([1, 1, 2, 3])), 2, 2).passed  # outside the model
    assert not finite(heads.with_columns(x=pl.Series([0.0, float("inf"), 1.0, 1.0])), ["x"]).passed


def test_scores_in_range_allows_undefined_correlations_only():
    scores = pl.DataFrame({"metric": ["accuracy", "matthews", "pearson"], "score": [0.8, -0.2, float("nan")]})
    outcome = scores_in_range(scores)
    assert outcome.passed and outcome.metadata["undefined_correlations"] == 1
    assert not scores_in_range(scores.with_columns(metric=pl.Series(["accuracy", "matthews", "f1"]))).passed
    outcome = scores_in_range(scores.with_columns(score=pl.Series([1.5, float("-inf"), 0.3])))
    assert not outcome.passed and outcome.metadata["scores_outside_range"] == 2
    assert not scores_in_range(scores.head(0)).passed


def _ablations(n_layers: int, n_heads: int) -> pl.DataFrame:
    settings = [("baseline", None, None)] + [
        ("head", layer, h) for layer in range(1, n_layers + 1) for h in range(1, n_heads + 1)
    ]
    settings += [("layer", layer, None) for layer in range(1, n_layers + 1)]
    return pl.DataFrame(
        [
            {"kind": k, "layer": layer, "head": h, "metric": m, "score": 0.5}
            for k, layer, h in settings
            for m in ("accuracy", "f1")
        ],
        schema_overrides={"layer": pl.Int16, "head": pl.Int16},
    )


def test_ablation_settings_complete():
    ablations = _ablations(2, 3)  # 1 + 6 + 2 settings x 2 metrics
    outcome = ablation_settings_complete(ablations, 2, 3)
    assert outcome.passed and outcome.metadata["head_settings"] == 6 and outcome.metadata["rows"] == 18
    assert not ablation_settings_complete(ablations, 2, 4).passed
    assert not ablation_settings_complete(ablations.slice(1), 2, 3).passed  # one metric of the baseline missing
    assert not ablation_settings_complete(ablations.filter(pl.col("kind") != "layer"), 2, 3).passed


def test_cosines_in_range():
    cosines = pl.DataFrame({"cosine": [1.0 + 5e-6, -1.0, 0.3]}, schema={"cosine": pl.Float32})
    assert cosines_in_range(cosines).passed
    for bad in (1.001, float("nan")):
        outcome = cosines_in_range(cosines.with_columns(cosine=pl.Series([bad, -1.0, 0.3], dtype=pl.Float32)))
        assert not outcome.passed and outcome.metadata["cosines_outside_range"] == 1
    assert not cosines_in_range(cosines.head(0)).passed


def test_estimate_check_takes_the_worst_estimated_layer():
    # Mean 0.988 and two layers above 0.99, but layer 3 at 0.97 fails a 0.99 threshold.
    layers = {2: 0.995, 3: 0.97, 4: 0.999}
    outcome = estimate_matches_exact(layers, 0.01, 0.99, "estimate(8)", list(range(16)))
    assert not outcome.passed
    assert outcome.metadata["worst_layer"] == 3 and outcome.metadata["worst_layer_pearson"] == 0.97
    assert outcome.metadata["pearson_layer_2"] == 0.995 and outcome.metadata["examples"] == 16
    assert estimate_matches_exact(layers, 0.01, 0.97, "estimate(8)", [1]).passed  # the run config's threshold
    exact = estimate_matches_exact({}, 0.0, 0.99, "exact", [1, 2])
    assert exact.passed and exact.metadata["worst_layer_pearson"] == 1.0


def test_estimate_check_gates_every_published_quantity_per_layer():
    # contributions track exact (Pearson 0.995), but layer 3's center of mass moves 0.03 tokens
    layers = {2: 0.995, 3: 0.995}
    tolerances = {"center_of_mass": 0.02, "histogram_mass": 0.01}
    gaps = {"center_of_mass": {2: 0.01, 3: 0.03}, "histogram_mass": {2: 0.004, 3: 0.009}}
    outcome = estimate_matches_exact(layers, 0.01, 0.99, "hutchpp(16,8)", [1], gaps, tolerances)
    assert not outcome.passed and outcome.metadata["published_misses"] == "center_of_mass layer 3: 0.0300 > 0.02"
    assert (
        outcome.metadata["center_of_mass_gap_layer_3"] == 0.03 and outcome.metadata["histogram_mass_tolerance"] == 0.01
    )
    within = {"center_of_mass": {2: 0.01, 3: 0.02}, "histogram_mass": {2: 0.004, 3: 0.009}}
    assert estimate_matches_exact(layers, 0.01, 0.99, "hutchpp(16,8)", [1], within, tolerances).passed
    lost = {"center_of_mass": {2: float("nan"), 3: 0.0}}  # a quantity the estimate lost is a miss
    assert not estimate_matches_exact(layers, 0.01, 0.99, "hutchpp(16,8)", [1], lost, tolerances).passed


def test_estimate_check_on_fewer_examples_than_its_minimum_judges_an_upper_bound():
    layers = {2: 0.995, 3: 0.995}
    tolerances = {"center_of_mass": 0.02}
    gaps = {"center_of_mass": {2: 0.01, 3: 0.015}}
    errors = {"center_of_mass": {2: 0.002, 3: 0.004}}
    # 4 of 100 written examples: layer 3's bound 0.015 + 1.645 x 0.004 = 0.0216 > 0.02 misses
    sampled = estimate_matches_exact(layers, 0.01, 0.99, "hutchpp(16,8)", [1, 2, 3, 4], gaps, tolerances, errors, 100)
    assert not sampled.passed
    assert sampled.metadata["published_misses"] == (
        "center_of_mass layer 3: 0.0216 (gap 0.0150 + 1.645 x standard error) > 0.02"
    )
    assert sampled.metadata["center_of_mass_gap_error_layer_3"] == 0.004
    assert sampled.metadata["judged_on"].startswith("one-sided 95% upper bound")
    # the same gaps on 16 examples, or on every written example, are judged as they are
    sixteen = list(range(16))
    assert estimate_matches_exact(layers, 0.01, 0.99, "hutchpp(16,8)", sixteen, gaps, tolerances, errors, 100).passed
    assert estimate_matches_exact(layers, 0.01, 0.99, "hutchpp(16,8)", [1, 2, 3, 4], gaps, tolerances, errors, 4).passed
    # one example of more gives no standard error: an estimator cannot pass on it
    lone = estimate_matches_exact(layers, 0.01, 0.99, "hutchpp(16,8)", [1], gaps, tolerances, {}, 100)
    assert not lone.passed and lone.metadata["judged_on"].startswith("no verdict")
