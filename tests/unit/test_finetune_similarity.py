"""Base vs fine-tuned attention cosine (Kovaleva Fig. 5) on tiny random BERTs."""

import copy

import polars as pl
import pytest
import torch

from dagster_project.compute.backoff import PassOutOfMemory
from dagster_project.compute.kovaleva.finetune_similarity import extract_finetune_cosines
from tests.out_of_memory import out_of_memory_above
from tests.tiny_models import TINY_HEADS, TINY_LAYERS


def test_identical_models_have_cosine_one(encoder, demo_tokens):
    cosines, _ = extract_finetune_cosines(encoder, encoder, demo_tokens, batch_tokens=256)
    assert cosines.height == 12 * TINY_LAYERS * TINY_HEADS
    assert (cosines["cosine"] - 1).abs().max() < 1e-5


def test_only_the_changed_layer_moves(encoder, demo_tokens):
    tuned = copy.deepcopy(encoder)
    with torch.no_grad():
        # Zero queries in layer 2: every row of its maps becomes uniform 1/n.
        attention = tuned.model.encoder.layer[1].attention.self
        attention.query.weight.zero_()
        attention.query.bias.zero_()
    cosines, _ = extract_finetune_cosines(encoder, tuned, demo_tokens)
    assert (cosines.filter(pl.col("layer") == 1)["cosine"] - 1).abs().max() < 1e-5
    # cosine with a uniform map = sum of the map / (n * ||map||) for every example and head
    example = int(demo_tokens["example_id"].min())
    rows = demo_tokens.filter(pl.col("example_id") == example).sort("position")
    with torch.inference_mode():
        maps = encoder.model(
            input_ids=torch.tensor([rows["token_id"].to_list()]),
            token_type_ids=torch.tensor([rows["segment"].to_list()]),
            output_attentions=True,
        ).attentions[1][0]
    n = rows.height
    expected = maps.sum((-2, -1)) / (n * maps.square().sum((-2, -1)).sqrt())
    got = cosines.filter((pl.col("example_id") == example) & (pl.col("layer") == 2)).sort("head")["cosine"].to_numpy()
    assert torch.allclose(torch.tensor(got), expected, atol=1e-5)


def test_out_of_memory_halves_the_batch_and_gives_the_small_batch_cosines(encoder, demo_tokens, caplog):
    tuned = copy.deepcopy(encoder)
    with torch.no_grad():
        tuned.model.encoder.layer[0].attention.self.query.weight.mul_(3.0)
    longest = int(demo_tokens.group_by("example_id").len()["len"].max())
    with caplog.at_level("WARNING"), out_of_memory_above(tuned.model, 2 * longest) as tried:
        retried, _ = extract_finetune_cosines(encoder, tuned, demo_tokens, batch_tokens=8 * longest)
    budgets = [int(record.getMessage().split(" at ")[1].split(" ")[0]) for record in caplog.records]
    assert budgets == [8 * longest, 4 * longest]  # then 2 * longest fits
    assert max(tried[-3:]) <= 2 * longest
    reference, _ = extract_finetune_cosines(encoder, tuned, demo_tokens, batch_tokens=2 * longest)
    keys = ["example_id", "layer", "head"]
    assert retried.height == 12 * TINY_LAYERS * TINY_HEADS and retried.sort(keys).equals(reference.sort(keys))


def test_out_of_memory_with_one_example_per_batch_names_what_to_lower(encoder, demo_tokens):
    with out_of_memory_above(encoder.model, None), pytest.raises(PassOutOfMemory) as raised:
        extract_finetune_cosines(encoder, encoder, demo_tokens, batch_tokens=1024)
    assert str(raised.value).startswith("Fine-tuning similarity: out of memory on cpu even at its smallest size")
    assert "Lower max_examples or the corpus's max_len" in str(raised.value)
