"""Metric functions on hand-built attention maps with known answers."""

import math

import pytest
import torch

from dagster_project.compute.metrics import (
    PATTERNS,
    PatternThresholds,
    TokenMasks,
    head_summaries,
    map_cosine,
    most_attended_words,
    nested_position_histograms,
    offset_bins,
    pair_mask,
    pattern_classes,
    received_attention,
    relative_position_histogram,
    row_entropy,
    segment_block_mass,
    span_pair_max,
    two_segment_examples,
    word_level_maps,
    word_pair_attention,
    word_piece_matrix,
)


def _masks(classes: list[str], width: int | None = None) -> TokenMasks:
    """Masks for one example from token classes; positions past len(classes) are padding."""
    width = width or len(classes)
    padded = classes + ["pad"] * (width - len(classes))
    pick = lambda name: torch.tensor([[c == name for c in padded]])  # noqa: E731
    return TokenMasks(
        valid=torch.tensor([[c != "pad" for c in padded]]), cls=pick("cls"), sep=pick("sep"), punct=pick("punct")
    )


def _as_batch(attn: torch.Tensor) -> torch.Tensor:
    """(T, T) -> (1, 1, 1, T, T)."""
    return attn[None, None, None]


def test_entropy_of_known_rows():
    rows = torch.tensor([[0.25, 0.25, 0.25, 0.25], [1.0, 0.0, 0.0, 0.0], [0.5, 0.5, 0.0, 0.0]])
    assert row_entropy(rows).tolist() == pytest.approx([math.log(4), 0.0, math.log(2)])


def test_entropy_is_torchs_entr_up_to_rounding():
    """Random rows with padded keys (exact zeros), whole rows at 0, and subnormal weights."""
    generator = torch.Generator().manual_seed(0)
    attn = (torch.randn(3, 2, 4, 9, 9, generator=generator) * 4).softmax(-1)
    attn[..., 6:] = 0.0
    attn[0, 0, 0, 2] = 0.0
    attn[1, 1, 1, 3, :2] = 1e-40  # subnormal: entr takes their (tiny) terms, the clamped log nearly so
    expected = torch.special.entr(attn.double()).sum(-1)
    torch.testing.assert_close(row_entropy(attn).double(), expected, rtol=1e-6, atol=1e-6)
    assert row_entropy(attn)[0, 0, 0, 2].item() == 0.0


def test_two_segment_examples_count_real_tokens_only():
    valid = torch.tensor([[True, True, True, False], [True, True, True, True], [True, False, False, False]])
    segment = torch.tensor([[0, 0, 0, 1], [0, 0, 1, 1], [0, 1, 1, 1]])  # padding's segment is ignored
    masks = TokenMasks(valid=valid, cls=valid & False, sep=valid & False, punct=valid & False, segment=segment)
    assert two_segment_examples(masks).tolist() == [False, True, False]


def test_uniform_map_summaries():
    # [CLS] a , b [SEP]: every row spreads 1/5 over all tokens.
    classes = ["cls", "other", "punct", "other", "sep"]
    stats = head_summaries(_as_batch(torch.full((5, 5), 0.2)), _masks(classes))
    values = {name: value.item() for name, value in stats.items()}
    assert values["to_cls"] == pytest.approx(0.2)
    assert values["to_sep"] == pytest.approx(0.2)
    assert values["to_punct"] == pytest.approx(0.2)
    assert values["to_self"] == pytest.approx(0.2)
    assert values["to_prev"] == pytest.approx(0.8 / 5)  # rows 1-4 of 5 have a previous token
    assert values["to_next"] == pytest.approx(0.8 / 5)
    assert values["sep_to_sep"] == pytest.approx(0.2)
    assert values["entropy"] == pytest.approx(math.log(5))
    assert values["cls_entropy"] == pytest.approx(math.log(5))
    assert values["row_sum_error"] < 1e-6


def test_previous_token_head():
    # Row 0 attends to itself, every other row entirely to the previous token.
    attn = torch.zeros(4, 4)
    attn[0, 0] = 1.0
    attn[torch.arange(1, 4), torch.arange(0, 3)] = 1.0
    stats = head_summaries(_as_batch(attn), _masks(["cls", "other", "other", "sep"]))
    assert stats["to_prev"].item() == pytest.approx(0.75)  # 3 of 4 rows: row 0 has no previous token
    assert stats["to_next"].item() == pytest.approx(0.0)
    assert stats["to_self"].item() == pytest.approx(0.25)
    assert stats["to_cls"].item() == pytest.approx(0.5)  # rows 0 and 1 of 4
    assert stats["sep_to_sep"].item() == pytest.approx(0.0)
    assert stats["entropy"].item() == pytest.approx(0.0)


def test_neighbour_masses_divide_by_all_rows():
    # docs/methods.md §3: to_prev/to_next are means over all n query rows; the first row has no
    # previous token, the last no next (0). Rows 1-3 put 0.66 on the previous token and
    # row 0 puts 0.3 on the next: to_prev = 1.98 / 4, to_next = 0.3 / 4 (not 1.98 / 3, 0.3 / 3).
    attn = torch.tensor(
        [
            [0.7, 0.3, 0.0, 0.0],
            [0.66, 0.34, 0.0, 0.0],
            [0.0, 0.66, 0.34, 0.0],
            [0.0, 0.0, 0.66, 0.34],
        ]
    )
    masks = _masks(["cls", "other", "other", "sep"], width=6)  # padded to 6: padding adds nothing
    padded = torch.zeros(6, 6)
    padded[:4, :4] = attn
    padded[4:] = 0.5  # garbage in padded rows
    stats = head_summaries(_as_batch(padded), masks)
    assert stats["to_prev"].item() == pytest.approx(1.98 / 4)
    assert stats["to_next"].item() == pytest.approx(0.3 / 4)
    # The +-1 band holds (1.98 + 0.3) / 4 = 0.57 < 0.6; over n - 1 rows it was 0.76.
    classes = pattern_classes(
        stats,
        torch.zeros(1, 1, 1),
        TokenMasks(**vars(masks) | {"segment": torch.zeros(1, 6, dtype=torch.long)}),
        PatternThresholds(vertical=0.9, diagonal=0.6, mixed=0.6),
    )
    assert PATTERNS[classes.item()] == "heterogeneous"


def test_sep_rows_to_sep():
    # [CLS] a [SEP] b [SEP]; the [SEP] rows put 0.45 on each [SEP] and 0.1 on [CLS].
    attn = torch.full((5, 5), 0.2)
    sep_row = torch.tensor([0.1, 0.0, 0.45, 0.0, 0.45])
    attn[2], attn[4] = sep_row, sep_row
    stats = head_summaries(_as_batch(attn), _masks(["cls", "other", "sep", "other", "sep"]))
    assert stats["sep_to_sep"].item() == pytest.approx(0.9)
    # Mean over 5 rows of the mass to [SEP]: three uniform rows give 0.4, the [SEP] rows 0.9.
    assert stats["to_sep"].item() == pytest.approx((3 * 0.4 + 2 * 0.9) / 5)


def test_padding_is_excluded():
    # A 3-token example padded to 5: padded rows are garbage, padded keys carry no mass.
    attn = torch.full((5, 5), 7.0)
    attn[:3, :3] = torch.tensor([[1.0, 0, 0], [0.5, 0.5, 0], [0, 0, 1.0]])
    attn[:3, 3:] = 0.0
    masks = _masks(["cls", "other", "sep"], width=5)
    stats = head_summaries(_as_batch(attn), masks)
    assert stats["to_self"].item() == pytest.approx((1 + 0.5 + 1) / 3)
    assert stats["entropy"].item() == pytest.approx(math.log(2) / 3)
    assert stats["to_prev"].item() == pytest.approx(0.5 / 3)  # rows 1, 2: 0.5 and 0, over n = 3 rows
    sums, counts = relative_position_histogram(_as_batch(attn), pair_mask(masks.valid, masks.valid))
    assert counts[0].tolist() == [0, 0, 1, 2, 3, 2, 1, 0, 0]
    assert sums[0, 0, 0].tolist() == pytest.approx([0, 0, 0, 0.5, 2.5, 0, 0, 0, 0])


def test_offset_bins_of_a_three_token_map():
    # Row q, column k -> k - q + 2: offsets -2..2 in bins 0..4.
    assert offset_bins(3).reshape(3, 3).tolist() == [[2, 3, 4], [1, 2, 3], [0, 1, 2]]


def test_histogram_sums_each_diagonal():
    attn = torch.arange(9.0).reshape(3, 3)  # offset -2: a[2,0]; -1: a[1,0]+a[2,1]; ...
    sums, counts = relative_position_histogram(_as_batch(attn), torch.ones(1, 3, 3, dtype=torch.bool))
    assert sums[0, 0, 0].tolist() == [6.0, 10.0, 12.0, 6.0, 2.0]
    assert counts[0].tolist() == [1, 2, 3, 2, 1]


def test_histogram_counts_and_content_scope():
    # [CLS] a b [SEP], uniform rows: content scope keeps only (a, b) pairs.
    attn = _as_batch(torch.full((4, 4), 0.25))
    masks = _masks(["cls", "other", "other", "sep"])
    sums, counts = relative_position_histogram(attn, pair_mask(masks.valid, masks.valid))
    assert counts[0].tolist() == [1, 2, 3, 4, 3, 2, 1]
    assert counts[0].sum().item() == 16  # n^2 pairs
    assert sums[0, 0, 0].sum().item() == pytest.approx(4.0)  # every row sums to 1
    sums, counts = relative_position_histogram(attn, pair_mask(masks.content, masks.content))
    assert counts[0].tolist() == [0, 0, 1, 2, 1, 0, 0]
    assert sums[0, 0, 0].tolist() == pytest.approx([0, 0, 0.25, 0.5, 0.25, 0, 0])


def test_batched_over_layers_and_heads():
    # Two heads in one call: identity and uniform; each gets its own answer.
    attn = torch.stack([torch.eye(3), torch.full((3, 3), 1 / 3)])[None, None]  # (1, 1, 2, 3, 3)
    stats = head_summaries(attn, _masks(["cls", "other", "sep"]))
    assert stats["entropy"][0, 0].tolist() == pytest.approx([0.0, math.log(3)])
    assert stats["to_self"][0, 0].tolist() == pytest.approx([1.0, 1 / 3])


def test_pattern_classes_follow_the_rules():
    # [CLS] a b c d e [SEP] f g h i j [SEP]: four hand-built heads, one per rule.
    classes = ["cls"] + ["other"] * 5 + ["sep"] + ["other"] * 5 + ["sep"]
    segment = torch.tensor([[0] * 7 + [1] * 6])
    n = len(classes)
    masks = TokenMasks(
        valid=torch.ones(1, n, dtype=torch.bool),
        cls=torch.tensor([[c == "cls" for c in classes]]),
        sep=torch.tensor([[c == "sep" for c in classes]]),
        punct=torch.zeros(1, n, dtype=torch.bool),
        segment=segment,
    )
    vertical = torch.zeros(n, n)
    vertical[:, 0] = 1.0  # everything on [CLS]
    diagonal = torch.zeros(n, n)
    diagonal[torch.arange(1, n), torch.arange(0, n - 1)] = 1.0  # previous token
    diagonal[0, 1] = 1.0
    own_content = (segment[0][:, None] == segment[0][None, :]) & masks.content[0][None, :]
    block = own_content / own_content.sum(-1, keepdim=True)  # uniform over the own segment's 5 words
    uniform = torch.full((n, n), 1 / n)
    attn = torch.stack([vertical, diagonal, block, uniform])[None, None]  # (1, 1, 4, n, n)
    summaries = head_summaries(attn, masks)
    block_mass = segment_block_mass(attn, masks)
    assert block_mass[0, 0, 2].item() == pytest.approx(1.0)
    assert block_mass[0, 0, 3].item() == pytest.approx(5 / n)  # five same-segment content keys
    found = pattern_classes(summaries, block_mass, masks, PatternThresholds())[0, 0].tolist()
    assert [PATTERNS[index] for index in found] == ["vertical", "diagonal", "block", "heterogeneous"]
    # With the thresholds low, the [CLS] head's 1/n diagonal share is not enough for the mix,
    # the previous-token head's 2/n share on [CLS] and [SEP] is.
    lenient = PatternThresholds(vertical=0.05, diagonal=0.15, mixed=0.15)
    found = pattern_classes(summaries, block_mass, masks, lenient)[0, 0].tolist()
    assert [PATTERNS[index] for index in found][:2] == ["vertical", "vertical+diagonal"]

    # A mixed head: 0.4 of every row as the [CLS] head, 0.4 as the previous-token head, 0.2 uniform.
    mixed = 0.4 * vertical + 0.4 * diagonal + 0.2 * uniform
    stats = head_summaries(mixed[None, None, None], masks)
    vertical_mass = 0.4 + 0.4 * 2 / n + 0.2 * 3 / n  # [CLS] + two [SEP] columns
    diagonal_mass = 0.4 / n + 0.4 + 0.2 * 24 / n**2  # 12 rows with a previous token, 12 with a next
    assert (stats["to_cls"] + stats["to_sep"]).item() == pytest.approx(vertical_mass)
    assert (stats["to_prev"] + stats["to_next"]).item() == pytest.approx(diagonal_mass)
    mass = segment_block_mass(mixed[None, None, None], masks)
    assert PATTERNS[pattern_classes(stats, mass, masks, PatternThresholds()).item()] == "vertical+diagonal"
    # Under the stricter reading (both single-class thresholds) the same map is only vertical:
    # 0.508 >= 0.5 on the special tokens, 0.459 < 0.5 on the band.
    strict = PatternThresholds(mixed=0.5)
    assert PATTERNS[pattern_classes(stats, mass, masks, strict).item()] == "vertical"


def test_a_stripe_on_punctuation_is_vertical_unless_asked_otherwise():
    # [CLS] a b c . d e [SEP]: every row puts 0.6 on the '.' column, 0.1 on [CLS], 0.06 on each word.
    classes = ["cls", "other", "other", "other", "punct", "other", "other", "sep"]
    n = len(classes)
    masks = TokenMasks(
        valid=torch.ones(1, n, dtype=torch.bool),
        cls=torch.tensor([[c == "cls" for c in classes]]),
        sep=torch.tensor([[c == "sep" for c in classes]]),
        punct=torch.tensor([[c == "punct" for c in classes]]),
        segment=torch.zeros(1, n, dtype=torch.long),
    )
    row = torch.tensor([0.1, 0.06, 0.06, 0.06, 0.6, 0.06, 0.06, 0.0])
    stats = head_summaries(row.expand(n, n)[None, None, None], masks)
    assert (stats["to_cls"] + stats["to_sep"]).item() == pytest.approx(0.1)
    assert stats["to_punct"].item() == pytest.approx(0.6)
    # previous + next per row: 0.06, 0.16, 0.12, 0.66 ('.' next), 0.12, 0.66 ('.' previous), 0.06, 0.06
    assert (stats["to_prev"] + stats["to_next"]).item() == pytest.approx(1.9 / n)  # under every threshold
    block = torch.zeros(1, 1, 1)
    assert PATTERNS[pattern_classes(stats, block, masks, PatternThresholds()).item()] == "vertical"  # 0.7 >= 0.5
    special_only = PatternThresholds(vertical_punctuation=False)  # 0.1 on [CLS]/[SEP]
    assert PATTERNS[pattern_classes(stats, block, masks, special_only).item()] == "heterogeneous"


# Word-level maps (Clark §4.1). Five pieces: [CLS] "play" "##ing" "ball" [SEP]; words
# 0 = pieces 1-2 (split), 1 = piece 3.
_PIECE_MAP = torch.tensor(
    [
        [0.2, 0.2, 0.2, 0.2, 0.2],
        [0.1, 0.1, 0.3, 0.4, 0.1],
        [0.0, 0.5, 0.1, 0.2, 0.2],
        [0.3, 0.3, 0.1, 0.2, 0.1],
        [0.2, 0.2, 0.2, 0.2, 0.2],
    ]
)
_MEMBERSHIP = word_piece_matrix(torch.tensor([[1, 3]]), torch.tensor([[3, 4]]), 5)


def test_word_piece_matrix_marks_spans():
    assert _MEMBERSHIP.tolist() == [[[0, 1, 1, 0, 0], [0, 0, 0, 1, 0]]]


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        # TO a word: sum over its pieces; FROM: mean / first / elementwise max of its pieces' rows.
        ("mean", [[(0.4 + 0.6) / 2, (0.4 + 0.2) / 2], [0.4, 0.2]]),
        ("first", [[0.4, 0.4], [0.4, 0.2]]),
        ("max", [[0.6, 0.4], [0.4, 0.2]]),
    ],
)
def test_word_level_maps_by_mode(mode, expected):
    words = word_level_maps(_PIECE_MAP[None, None, None], _MEMBERSHIP, mode)
    assert words.shape == (1, 1, 1, 2, 2)
    torch.testing.assert_close(words[0, 0, 0], torch.tensor(expected))


def test_word_level_maps_reject_unknown_modes():
    with pytest.raises(ValueError, match="word_mode"):
        word_level_maps(_PIECE_MAP[None, None, None], _MEMBERSHIP, "last")


def test_most_attended_other_word_skips_self_padding_and_ties_low():
    maps = torch.tensor(
        [
            [0.1, 0.4, 0.4, 0.1],  # tie between words 1 and 2 -> 1
            [0.2, 0.6, 0.1, 0.1],  # its own column is the largest -> next best, word 0
            [0.0, 0.0, 0.3, 0.9],  # word 3 is padding -> best real other word, 0 (tie 0/1 at 0.0)
            [0.5, 0.5, 0.0, 0.0],
        ]
    )[None, None, None]
    real = torch.tensor([[True, True, True, False]])
    assert most_attended_words(maps, real)[0, 0, 0, :3].tolist() == [1, 0, 0]
    single = most_attended_words(torch.ones(1, 1, 1, 2, 2), torch.tensor([[True, False]]))
    assert single[0, 0, 0, 0].item() == -1


def test_received_attention_is_column_mean_and_cls_row():
    # n = 3 real tokens padded to 4; the padded query row holds garbage that must not count.
    attn = torch.tensor([[0.5, 0.5, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.2, 0.3, 0.5, 0.0], [0.9, 0.1, 0.0, 0.0]])[
        None, None, None
    ]
    received, from_cls = received_attention(attn, _masks(["cls", "other", "sep"], width=4))
    assert torch.allclose(received[0, 0, 0], torch.tensor([0.7 / 3, 1.8 / 3, 0.5 / 3, 0.0]))
    assert received.sum(-1).item() == pytest.approx(1.0)
    assert torch.equal(from_cls[0, 0, 0], torch.tensor([0.5, 0.5, 0.0, 0.0]))


def test_received_attention_without_cls_is_nan():
    attn = torch.full((1, 1, 1, 2, 2), 0.5)
    _, from_cls = received_attention(attn, _masks(["other", "other"]))
    assert from_cls.isnan().all()


def test_word_pair_attention_means_over_pairs():
    word_maps = torch.tensor([[0.1, 0.2, 0.3], [0.4, 0.5, 0.6], [0.7, 0.8, 0.9]])[None, None, None]
    pairs = torch.zeros(2, 3, 3, dtype=torch.bool)
    pairs[0, 0, 1] = pairs[0, 2, 1] = True  # 0.2 and 0.8
    means, counts = word_pair_attention(word_maps.expand(2, 1, 1, 3, 3), pairs)
    assert counts.tolist() == [2, 0]
    assert means[0, 0, 0].item() == pytest.approx(0.5)
    assert means[1].isnan().all()


def test_span_pair_max_reads_both_directions_only():
    attn = torch.tensor(
        [[0.10, 0.20, 0.30, 0.40], [0.05, 0.15, 0.25, 0.55], [0.60, 0.35, 0.05, 0.00], [0.05, 0.45, 0.40, 0.10]]
    )[None, None, None]
    first = torch.tensor([[False, True, False, False]])
    second = torch.tensor([[False, False, True, True]])
    # pairs (1,2)=0.25 (1,3)=0.55 (2,1)=0.35 (3,1)=0.45; 0.60 at (2,0) is outside the link
    assert span_pair_max(attn, first, second).item() == pytest.approx(0.55)
    assert span_pair_max(attn, first, torch.zeros_like(second)).item() == float("-inf")


def test_map_cosine_on_cropped_maps():
    valid = torch.tensor([[True, True, False]])
    first = torch.tensor([[0.5, 0.5, 0.0], [1.0, 0.0, 0.0], [0.3, 0.3, 0.4]])[None, None, None]
    same_but_padding = first.clone()
    same_but_padding[..., 2, :] = torch.tensor([1.0, 0.0, 0.0])  # padded query row differs
    assert map_cosine(first, same_but_padding, valid).item() == pytest.approx(1.0)
    other = torch.tensor([[0.0, 1.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])[None, None, None]
    # cropped: a = [.5 .5 1 0], b = [0 1 0 1] -> 0.5 / (sqrt(1.5) * sqrt(2))
    assert map_cosine(first, other, valid).item() == pytest.approx(0.5 / math.sqrt(3.0))


def test_map_cosine_of_a_map_with_itself_is_at_most_one_in_float32():
    torch.manual_seed(0)
    maps = torch.softmax(torch.randn(8, 2, 4, 12, 12), -1)
    valid = torch.ones(8, 12, dtype=torch.bool)
    norms = maps.square().sum((-2, -1)).sqrt()
    unclamped = (maps * maps).sum((-2, -1)) / (norms * norms)
    assert (unclamped > 1).any()  # float32 rounding: here 9 of the 64 maps a step above 1
    cosines = map_cosine(maps, maps, valid)
    assert cosines.max() == 1.0 and cosines.min() > 1 - 1e-6


def test_summary_columns_skip_the_block_mass_only_where_it_decides_nothing():
    """A batch of single segments gets the classes pattern_classes gives with the block mass; a batch with a
    sentence pair still finds its block head."""
    from dagster_project.compute.attention_facts import summary_columns
    from dagster_project.compute.batching import Batch

    n = 8  # [CLS] a b [SEP] c d e [SEP]
    generator = torch.Generator().manual_seed(1)
    attn = (torch.randn(2, 1, 3, n, n, generator=generator) * 3).softmax(-1)
    segment = torch.tensor([[0, 0, 0, 0, 1, 1, 1, 1]])
    content = torch.tensor([False, True, True, False, True, True, True, False])
    own = (segment[0][:, None] == segment[0][None, :]) & content
    attn[1, 0, 0] = own / own.sum(-1, keepdim=True)  # each row uniform over its own segment's words
    valid = torch.ones(2, n, dtype=torch.bool)
    cls = torch.zeros(2, n, dtype=torch.bool)
    cls[:, 0] = True
    sep = torch.zeros(2, n, dtype=torch.bool)
    sep[:, [3, 7]] = True
    for segments in (torch.zeros(2, n, dtype=torch.int64), segment.expand(2, n)):
        masks = TokenMasks(valid=valid, cls=cls, sep=sep, punct=valid & False, segment=segments)
        batch = Batch(torch.tensor([7, 8]), {}, masks)
        found = summary_columns(attn, batch)["pattern"]
        block = segment_block_mass(attn, masks)
        expected = pattern_classes(head_summaries(attn, masks), block, masks, PatternThresholds())
        assert found.tolist() == expected.reshape(-1).tolist()
    assert PATTERNS[found[3]] == "block"  # example 2, head 1 of the sentence pairs


def test_nested_position_histograms_are_two_scatters_in_one():
    """Both scopes of the position histograms (real tokens, and the content tokens among them) from one
    scatter: what relative_position_histogram gives for each, sums up to float rounding, counts exactly."""
    generator = torch.Generator().manual_seed(2)
    lengths = torch.tensor([9, 6, 2])
    valid = torch.arange(9)[None, :] < lengths[:, None]
    content = valid & (torch.arange(9)[None, :] > 0) & (torch.arange(9)[None, :] < lengths[:, None] - 1)
    attn = (torch.randn(3, 2, 4, 9, 9, generator=generator) * 2).softmax(-1)  # padded rows keep junk
    nested = nested_position_histograms(attn, pair_mask(valid, valid), pair_mask(content, content))
    for (sums, counts), tokens in zip(nested, (valid, content), strict=True):
        expected_sums, expected_counts = relative_position_histogram(attn, pair_mask(tokens, tokens))
        torch.testing.assert_close(sums, expected_sums, rtol=1e-6, atol=1e-7)
        assert torch.equal(counts, expected_counts)
    assert nested[1][1][2].sum().item() == 0  # a 2-token example has no content pair
    assert nested[0][1][0].sum().item() == 81
