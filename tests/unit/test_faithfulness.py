"""Faithfulness of the weightings (compute/compare/faithfulness.py): gradient x input against autograd on
each example alone, the [CLS] rows on a hand-made map, Spearman against scipy's, and the pass's rows on a
tiny classifier, per layer and rolled out (raw attention's product by hand)."""

from pathlib import Path

import numpy as np
import polars as pl
import pytest
import torch
from scipy.stats import spearmanr

from dagster_project.compute.batching import length_batches
from dagster_project.compute.clark.gradients import LossModel, load_loss_model
from dagster_project.compute.compare.faithfulness import (
    cls_attributions,
    gradient_x_input,
    saliency_maps,
    spearman_rows,
    weighting_faithfulness,
)
from dagster_project.compute.weightings import AGGREGATIONS, WEIGHTINGS, ModelWeightings
from tests.unit.test_gradients import PAIRS, _tokens


@pytest.fixture(scope="module")
def classifier(tiny_classifier_dir: Path) -> LossModel:
    loaded = load_loss_model(str(tiny_classifier_dir))
    assert isinstance(loaded, LossModel)
    return loaded


def _alone_saliency(model: torch.nn.Module, ids: torch.Tensor, types: torch.Tensor) -> torch.Tensor:
    """||d z_c / d e * e|| of one unpadded example, e fed as inputs_embeds (a leaf autograd differentiates)."""
    embeddings = model.get_input_embeddings()(ids[None]).detach().requires_grad_(True)
    logits = model(inputs_embeds=embeddings, token_type_ids=types[None]).logits[0]
    (gradient,) = torch.autograd.grad(logits[logits.argmax()], embeddings)
    return (gradient * embeddings).norm(dim=-1)[0].detach()


def test_gradient_x_input_matches_autograd_on_each_example_alone(classifier: LossModel, tokenizer) -> None:
    tokens = _tokens(tokenizer, PAIRS)
    (batch,) = length_batches(tokens, classifier.pad_token_id, 10_000, True)
    saliency, output = gradient_x_input(classifier.model, batch.inputs)
    assert output.logits.shape == (2, 3) and len(output.attentions) == classifier.model.config.num_hidden_layers
    for row, example_id in enumerate(batch.example_ids.tolist()):
        valid = batch.masks.valid[row]
        ids = batch.inputs["input_ids"][row][valid]
        expected = _alone_saliency(classifier.model, ids, batch.inputs["token_type_ids"][row][valid])
        torch.testing.assert_close(saliency[row][valid], expected, rtol=1e-4, atol=1e-6)
        assert (saliency[row][~valid] < 1e-6).all(), "padding gets no saliency"
        assert (expected > 0).all(), f"example {example_id}: every real token moves the logit"


def test_cls_attributions_are_the_last_layers_cls_row() -> None:
    # (B=2, A=2, W=1, L=2, T=3, T=3) aggregated maps: layer 1 is never read
    maps = torch.arange(2 * 2 * 2 * 9, dtype=torch.float32).reshape(2, 2, 1, 2, 3, 3)
    found = cls_attributions(maps, torch.tensor([0, 2]))
    assert found.shape == (2, 2, 1, 3)
    # example 0 ([CLS] at 0), layer 2, row 0: [9, 10, 11] per_layer, [27, 28, 29] rolled out; example 1 ([CLS]
    # at 2), row 2: [51, 52, 53] and [69, 70, 71]
    torch.testing.assert_close(found[0, :, 0], torch.tensor([[9.0, 10, 11], [27, 28, 29]]))
    torch.testing.assert_close(found[1, :, 0], torch.tensor([[51.0, 52, 53], [69, 70, 71]]))


def test_spearman_rows_match_scipy_over_the_real_tokens() -> None:
    generator = np.random.default_rng(0)
    attributions = generator.random((3, 2, 6)).round(1)  # rounding makes ties
    saliency = generator.random((3, 6))
    valid = np.array([[True] * 6, [True] * 4 + [False] * 2, [True] * 5 + [False]])
    attributions[2, 1, :5] = 0.25  # constant over the real tokens: no correlation
    found = spearman_rows(attributions, saliency, valid)
    for example in range(3):
        n = valid[example].sum()
        for weighting in range(2):
            if (example, weighting) == (2, 1):
                assert np.isnan(found[example, weighting])
                continue
            expected = spearmanr(attributions[example, weighting, :n], saliency[example, :n]).statistic
            assert found[example, weighting] == pytest.approx(expected, abs=1e-12)
    assert spearman_rows(saliency[:, None], saliency, valid) == pytest.approx(np.ones((3, 1)))
    # rows under more axes (example, aggregation, weighting) are each correlated alike
    stacked = spearman_rows(np.stack([attributions, attributions[:, ::-1]], axis=1), saliency, valid)
    np.testing.assert_array_equal(stacked[:, 0], found)


def test_the_pass_writes_one_correlation_per_example_weighting_and_aggregation(
    classifier: LossModel, tokenizer
) -> None:
    tokens = _tokens(tokenizer, PAIRS * 2)
    found = weighting_faithfulness(classifier, tokens, list(WEIGHTINGS), batch_tokens=40)
    rows = found.rows
    assert found.n_examples == 4 and rows.height == 4 * len(WEIGHTINGS) * len(AGGREGATIONS)
    cells = rows.group_by("example_id").agg(pl.format("{} {}", "aggregation", "weighting").sort())
    expected = sorted(f"{aggregation} {weighting}" for aggregation in AGGREGATIONS for weighting in WEIGHTINGS)
    assert cells["aggregation"].to_list() == [expected] * 4
    assert rows["spearman"].drop_nulls().is_between(-1, 1).all() and rows["spearman"].null_count() == 0
    # an example's value is its saliency and attribution row's correlation, whatever its batch
    (batch,) = length_batches(tokens.filter(pl.col("example_id") == 0), classifier.pad_token_id, 10_000, True)
    alone = saliency_maps(classifier, batch, ModelWeightings.of(classifier.model, WEIGHTINGS))
    for a, aggregation in enumerate(AGGREGATIONS):
        for w, weighting in enumerate(WEIGHTINGS):
            value = rows.filter(
                (pl.col("example_id") == 0)
                & (pl.col("weighting") == weighting)
                & (pl.col("aggregation") == aggregation)
            )["spearman"].item()
            expected_rho = spearmanr(alone.attributions[0, a, w].numpy(), alone.saliency[0].numpy()).statistic
            assert value == pytest.approx(expected_rho, abs=1e-6), (aggregation, weighting)
    # the rolled-out [CLS] row of raw attention is the product of the layers' head means, by hand
    with torch.no_grad():
        output = classifier.model(**batch.inputs, output_attentions=True)
    means = [layer[0].mean(0) for layer in output.attentions]
    product = means[0]
    for layer_map in means[1:]:
        product = layer_map @ product
    torch.testing.assert_close(alone.attributions[0, 1, 0], product[0], rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(alone.attributions[0, 0, 0], means[-1][0], rtol=1e-4, atol=1e-6)
    assert set(rows["predicted_label"]) <= {0, 1, 2} and (rows["n_tokens"] > 0).all()


def test_a_head_that_is_no_classifier_is_refused(tiny_mlm_dir: Path, tokenizer) -> None:
    masked_lm = load_loss_model(str(tiny_mlm_dir))
    with pytest.raises(ValueError, match="this model's head is masked_lm"):
        weighting_faithfulness(masked_lm, _tokens(tokenizer, PAIRS), ["attention"])
