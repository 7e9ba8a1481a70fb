"""Kovaleva's example maps picked from maps that come one layer at a time (attention_facts.pattern_map_candidates
and pick_pattern_examples): an example's map is its first head of the class in (layer, head) order, and the
examples picked are the batch's first with the class, whichever layer shows it first."""

import numpy as np
import polars as pl
import torch

from dagster_project.compute.attention_facts import PatternCandidates, pattern_map_candidates, pick_pattern_examples
from dagster_project.compute.batching import Batch
from dagster_project.compute.metrics import PATTERNS, TokenMasks

HETEROGENEOUS = PATTERNS.index("heterogeneous")
BLOCK = PATTERNS.index("block")


def _batch(lengths: list[int], width: int) -> Batch:
    valid = torch.arange(width)[None] < torch.tensor(lengths)[:, None]
    none = torch.zeros_like(valid)
    return Batch(torch.tensor([10, 11, 12]), {}, TokenMasks(valid, none, none, none))


def _picked(per_pattern: int) -> dict[str, list[pl.DataFrame]]:
    """Three examples, 2 layers of 2 heads, every head heterogeneous but these block heads: example 0 has
    one in layer 2 only (head 2), example 1 in layers 1 (head 2) and 2 (head 1), example 2 in layer 1 (head 1)."""
    width = 4
    batch = _batch([4, 3, 2], width)
    maps = torch.arange(3 * 2 * 2 * width * width, dtype=torch.float32).reshape(3, 2, 2, width, width)
    patterns = torch.full((3, 2, 2), HETEROGENEOUS)
    patterns[0, 1, 1] = patterns[1, 0, 1] = patterns[1, 1, 0] = patterns[2, 0, 0] = BLOCK
    candidates: PatternCandidates = {}
    wanted = dict.fromkeys(PATTERNS, per_pattern)
    for layer in range(2):
        pattern_map_candidates(
            maps[:, layer : layer + 1], batch, patterns[:, layer : layer + 1], layer + 1, candidates, wanted
        )
    picked: dict[str, list[pl.DataFrame]] = {}
    pick_pattern_examples(candidates, batch.example_ids, picked, per_pattern)
    return picked


def _chosen(frames: list[pl.DataFrame]) -> list[tuple[int, int, int, int]]:
    """(example, layer, head, cells) of each picked map."""
    return [(frame["example_id"][0], frame["layer"][0], frame["head"][0], frame.height) for frame in frames]


def test_an_example_whose_class_shows_in_a_later_layer_still_comes_first() -> None:
    picked = _picked(per_pattern=2)
    # example 0 (first in the batch) is found at layer 2, after examples 1 and 2 were at layer 1
    assert _chosen(picked["block"]) == [(10, 2, 2, 16), (11, 1, 2, 9)]
    assert _chosen(picked["heterogeneous"]) == [(10, 1, 1, 16), (11, 1, 1, 9)]
    assert set(picked) == set(PATTERNS) and picked["vertical"] == []


def test_one_map_per_class_is_the_first_examples() -> None:
    picked = _picked(per_pattern=1)
    assert _chosen(picked["block"]) == [(10, 2, 2, 16)]
    # the map itself: example 0's layer 2, head 2, cropped to its 4 real tokens, row by row
    block = picked["block"][0]
    start = ((0 * 2 + 1) * 2 + 1) * 16
    assert np.array_equal(block["attention"].to_numpy(), np.arange(start, start + 16, dtype=np.float32))
    assert block["query"].to_list() == [q for q in range(4) for _ in range(4)]
    assert block["key"].to_list() == [*range(4)] * 4
