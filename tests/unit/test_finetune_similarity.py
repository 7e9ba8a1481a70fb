"""Base vs fine-tuned attention cosine (Kovaleva Fig. 5) on tiny random BERTs."""

import copy

import polars as pl
import torch

from dagster_project.compute.kovaleva.finetune_similarity import extract_finetune_cosines
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
