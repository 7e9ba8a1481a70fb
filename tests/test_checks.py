"""Fact checks on small frames that pass and frames that must fail."""

import polars as pl
import pytest

from dagster_project.checks import finite, histogram_masses, relation_hit_targets, rows_per_example, rows_sum_to_one


def _histogram(sums: list[float], counts: list[int]) -> pl.DataFrame:
    return pl.DataFrame(
        {"example_id": [0] * 3, "kind": ["attention"] * 3, "scope": ["all"] * 3, "layer": [1] * 3, "head": [1] * 3,
         "offset": [-1, 0, 1], "weight_sum": sums, "pair_count": counts}
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
    summaries = pl.DataFrame({"example_id": [0, 0, 1, 1], "row_sum_error": [1e-7, 2e-7, 1e-7, 3e-3], "entropy": [0.1, float("nan"), 0.2, 0.3]})
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
