"""Agreement of the weightings with HTA (compute/compare/hta_agreement.py): the row Spearman against scipy's
with ties per aggregation, the per-layer contributions on hand-made maps, and the HTA pass's rows on the
tiny BERT against a plain-loop reference (autograd Jacobians, numpy products, scipy), per layer and rolled
out."""

from contextlib import nullcontext
from dataclasses import replace

import numpy as np
import polars as pl
import pytest
import torch
from scipy.stats import ConstantInputWarning, spearmanr

from dagster_project.compute import weightings
from dagster_project.compute.batching import length_batches
from dagster_project.compute.compare.hta_agreement import agreement_columns, layer_contributions
from dagster_project.compute.models import LoadedEncoder
from dagster_project.compute.pascual.hta import HtaMethod, context_function
from dagster_project.compute.pascual.hta_facts import extract_hta_facts
from dagster_project.compute.weightings import AGGREGATIONS, WEIGHTINGS, ModelWeightings
from tests.tiny_models import TINY_LAYERS


def test_agreement_is_the_mean_row_spearman_of_scipy_with_ties() -> None:
    # one weighting, two layers of 4 tokens; ties in both maps, one constant row (no correlation)
    per_layer = torch.tensor(
        [
            [
                [[0.4, 0.3, 0.2, 0.1], [0.1, 0.1, 0.4, 0.4], [0.25, 0.25, 0.25, 0.25], [0.7, 0.1, 0.1, 0.1]],
                [[0.1, 0.2, 0.3, 0.4], [0.5, 0.2, 0.2, 0.1], [0.3, 0.3, 0.2, 0.2], [0.1, 0.6, 0.2, 0.1]],
            ]
        ]
    )
    # the second aggregation: the same rows with their keys reversed
    attributions = torch.stack([per_layer, per_layer.flip(-1)])  # (A=2, W=1, L=2, 4, 4)
    contributions = torch.tensor(
        [
            [[0.5, 0.2, 0.2, 0.1], [0.2, 0.3, 0.3, 0.2], [0.1, 0.2, 0.3, 0.4], [0.4, 0.4, 0.1, 0.1]],
            [[0.4, 0.3, 0.2, 0.1], [0.4, 0.1, 0.3, 0.2], [0.25, 0.25, 0.3, 0.2], [0.2, 0.5, 0.2, 0.1]],
        ]
    )
    columns = agreement_columns(attributions, contributions, ("norm",), 7)
    expected = []
    for aggregation in range(2):
        for layer in range(2):
            # scipy warns of the constant row and gives it NaN, which the mean leaves out
            with pytest.warns(ConstantInputWarning) if layer == 0 else nullcontext():
                rhos = [
                    spearmanr(attributions[aggregation, 0, layer, row], contributions[layer, row]).statistic
                    for row in range(4)
                ]
            expected.append((np.nanmean(rhos), int(np.isfinite(rhos).sum())))
    # by hand, layer 1: ranks (4, 3, 2, 1) vs (4, 2.5, 2.5, 1) give 4.5 / sqrt(5 * 4.5), (1.5, 1.5, 3.5, 3.5) vs
    # (1.5, 3.5, 3.5, 1.5) give 0, the third row is constant (none), (4, 2, 2, 2) vs (3.5, 3.5, 1.5, 1.5) 2 / sqrt(12);
    # with the keys reversed each row's correlation changes sign (the 0 stays 0)
    assert expected[0][0] == pytest.approx((4.5 / np.sqrt(22.5) + 0.0 + 2 / np.sqrt(12)) / 3, abs=1e-9)
    assert expected[2][0] == pytest.approx(-expected[0][0], abs=1e-9)
    np.testing.assert_allclose(columns["spearman"], [value for value, _ in expected], atol=1e-6)
    assert columns["n_rows"].tolist() == [3, 4, 3, 4]
    assert columns["aggregation"].tolist() == ["per_layer", "per_layer", "rolled_out", "rolled_out"]
    assert columns["layer"].tolist() == [1, 2, 1, 2] and columns["weighting"].tolist() == ["norm"] * 4
    assert columns["example_id"].tolist() == [7] * 4


def test_layer_contributions_take_every_head_at_once() -> None:
    # one layer, 2 heads, 2 tokens: over both heads row 1 is (sqrt(3^2 + 4^2), 1) = (5, 1), row 2 (2, 2)
    norms = torch.tensor([[[[3.0, 1.0], [0.0, 2.0]], [[4.0, 0.0], [2.0, 0.0]]]])
    found = layer_contributions(norms)
    torch.testing.assert_close(found, torch.tensor([[[5 / 6, 1 / 6], [0.5, 0.5]]]))


def _reference_agreement(encoder: LoadedEncoder, inputs: dict[str, torch.Tensor]) -> dict[tuple[str, str], np.ndarray]:
    """Per (aggregation, weighting) and layer the mean row Spearman against HTA of every head at once, from
    the full autograd Jacobian of the contexts and scipy, of raw attention (head means) and attention rollout
    (0.5 A + 0.5 I): each layer's own map (per_layer), and the plain products through the layers (rolled_out)."""
    model = encoder.model
    with torch.no_grad():
        output = model(**inputs, output_attentions=True, output_hidden_states=True)
    e0 = output.hidden_states[0][0]
    contexts = context_function(model)
    jacobian = torch.autograd.functional.jacobian(lambda x: contexts(x[None]), e0)  # (L, n, H, dh, n, D)
    hta = jacobian.pow(2).sum((2, 3, 5)).sqrt().numpy()  # (L, j, i)
    hta = hta / hta.sum(-1, keepdims=True)
    heads_mean = torch.stack(output.attentions)[:, 0].mean(1).numpy()  # (L, n, n)
    n = heads_mean.shape[-1]
    maps: dict[tuple[str, str], list[np.ndarray]] = {
        (aggregation, name): [] for aggregation in ("per_layer", "rolled_out") for name in ("attention", "rollout")
    }
    for layer, attn in enumerate(heads_mean):
        mixed = 0.5 * attn + 0.5 * np.eye(n)
        mixed = mixed / mixed.sum(-1, keepdims=True)
        for name, layer_map in (("attention", attn), ("rollout", mixed)):
            maps["per_layer", name].append(layer_map)
            rolled = maps["rolled_out", name]
            rolled.append(layer_map if layer == 0 else layer_map @ rolled[-1])
    return {
        key: np.array(
            [
                np.mean([spearmanr(layer_map[row], hta[layer][row]).statistic for row in range(n)])
                for layer, layer_map in enumerate(layer_maps)
            ]
        )
        for key, layer_maps in maps.items()
    }


def test_the_hta_pass_writes_the_agreement_of_every_weighting(encoder: LoadedEncoder, demo_tokens) -> None:
    tokens = demo_tokens.filter(pl.col("example_id").is_in(demo_tokens["example_id"].unique().sort()[:2].implode()))
    facts = extract_hta_facts(encoder, tokens, HtaMethod(None))
    rows = facts.tables["hta_agreement"]
    assert rows.height == 2 * TINY_LAYERS * len(WEIGHTINGS) * len(AGGREGATIONS)
    assert set(rows["weighting"]) == set(WEIGHTINGS) and set(rows["hta_method"]) == {"exact"}
    assert set(rows["aggregation"]) == set(AGGREGATIONS)
    assert rows["spearman"].null_count() == 0 and rows["spearman"].is_between(-1, 1).all()
    for batch in length_batches(tokens, encoder.tokenizer.pad_token_id, 1, encoder.spec.takes_token_types):
        example_id = int(batch.example_ids[0])
        n_tokens = batch.inputs["input_ids"].shape[1]
        reference = _reference_agreement(encoder, batch.inputs)
        for (aggregation, name), expected in reference.items():
            found = rows.filter(
                (pl.col("example_id") == example_id)
                & (pl.col("weighting") == name)
                & (pl.col("aggregation") == aggregation)
            ).sort("layer")
            np.testing.assert_allclose(
                found["spearman"].to_numpy(), expected, atol=1e-4, err_msg=f"{aggregation} {name}"
            )
            assert found["n_rows"].to_list() == [n_tokens] * TINY_LAYERS
        # in the first layer every weighting's product is its own map
        first = rows.filter((pl.col("example_id") == example_id) & (pl.col("layer") == 1)).pivot(
            "aggregation", index="weighting", values="spearman"
        )
        np.testing.assert_allclose(first["per_layer"].to_numpy(), first["rolled_out"].to_numpy(), atol=1e-5)


def test_a_family_without_named_layer_norms_is_refused_before_any_forward(
    encoder: LoadedEncoder, monkeypatch: pytest.MonkeyPatch
) -> None:
    without_norms = replace(weightings.attention_layout(encoder.model), residual_norm=None)
    monkeypatch.setattr(weightings, "attention_layout", lambda model: without_norms)
    with pytest.raises(ValueError, match="family 'bert'"):
        ModelWeightings.of(encoder.model, ["globenc"])
    assert ModelWeightings.of(encoder.model, ["norm"]).weightings == ("attention", "norm")
