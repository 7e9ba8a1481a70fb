"""HTA on tiny random BERTs against brute-force Jacobians and analytic cases."""

import math

import polars as pl
import pytest
import torch
from transformers import BertConfig, BertModel

from dagster_project.compute.pascual.hta import (
    HtaMethod,
    attention_weights,
    estimate_error,
    input_norms,
    normalize_rows,
    previous_layer_norms,
    row_correlations,
)
from dagster_project.compute.pascual.hta_facts import check_sample

LAYERS, HEADS, N = 2, 2, 5


@pytest.fixture(scope="module")
def model() -> BertModel:
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=50,
        hidden_size=16,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        intermediate_size=32,
        attn_implementation="eager",
    )
    return BertModel(config).eval()


@pytest.fixture(scope="module")
def hidden(model: BertModel) -> tuple[torch.Tensor, ...]:
    with torch.no_grad():
        return model(torch.randint(0, 50, (1, N)), output_hidden_states=True).hidden_states


def _brute_force(function, x: torch.Tensor) -> torch.Tensor:
    """||d out_j / d x_i||_F from the full Jacobian of out (..., n, H, dh) w.r.t. x (n, D)."""
    jacobian = torch.autograd.functional.jacobian(function, x)  # (..., n, H, dh, n, D)
    norms = jacobian.pow(2).sum((-1, -3)).sqrt()  # (..., j, H, i)
    return norms.movedim(-2, -3)  # (..., H, j, i)


def test_previous_layer_closed_form_matches_autograd(model, hidden):
    inputs = torch.stack(hidden[:-1])[:, 0]
    closed = previous_layer_norms(attention_weights(model), inputs)
    for layer in range(LAYERS):
        module = model.encoder.layer[layer].attention.self
        reference = _brute_force(lambda x, module=module: module(x[None])[0][0].view(N, HEADS, -1), inputs[layer])
        torch.testing.assert_close(closed[layer], reference, atol=1e-6, rtol=1e-5)


def _contexts(model: BertModel):
    captured = []
    for layer in model.encoder.layer:
        layer.attention.self.register_forward_hook(lambda _m, _i, output: captured.append(output[0]))

    def run(x: torch.Tensor) -> torch.Tensor:
        captured.clear()
        model.encoder(x[None])
        return torch.stack(captured)[:, 0].view(LAYERS, N, HEADS, -1)

    return run


def test_exact_input_contribution_matches_autograd(hidden):
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=50,
        hidden_size=16,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        intermediate_size=32,
        attn_implementation="eager",
    )
    fresh = BertModel(config).eval()  # hooks of the brute force stay on this copy
    exact = input_norms(fresh, hidden[0][0], HtaMethod.parse("exact"))
    reference = _brute_force(_contexts(fresh), hidden[0][0])
    torch.testing.assert_close(exact, reference, atol=1e-6, rtol=1e-5)


def test_input_norms_do_not_depend_on_the_chunk(model, hidden):
    e0 = hidden[0][0]
    for method in (HtaMethod(None), HtaMethod(3)):
        automatic = input_norms(model, e0, method, torch.Generator().manual_seed(4))
        for chunk in (1, 5, 16 * N):  # 5 straddles input tokens (16 unit tangents or 3 probes each)
            chunked = input_norms(model, e0, method, torch.Generator().manual_seed(4), chunk_size=chunk)
            torch.testing.assert_close(chunked, automatic, atol=1e-6, rtol=1e-5)


def test_first_layer_input_and_previous_layer_agree(model, hidden):
    # e^0 is the first layer's input, so both contributions coincide there.
    exact = input_norms(model, hidden[0][0], HtaMethod(None))
    closed = previous_layer_norms(attention_weights(model), torch.stack(hidden[:-1])[:, 0])
    torch.testing.assert_close(exact[0], closed[0], atol=1e-6, rtol=1e-5)


def test_contributions_of_a_row_sum_to_one(model, hidden):
    contributions = normalize_rows(input_norms(model, hidden[0][0], HtaMethod.parse("estimate(3)")))
    torch.testing.assert_close(contributions.sum(-1), torch.ones(LAYERS, HEADS, N))
    assert (contributions >= 0).all()


def test_uniform_attention_with_identity_values_is_uniform():
    # W_Q = 0 and b_Q = 0 make every score 0 (uniform attention, g = 0); W_V = I, b_V = 0.
    # Then d o_j / d x_i = I / n for every i: each token contributes 1/n, norm sqrt(D)/n.
    torch.manual_seed(1)
    size, tokens = 8, 4
    config = BertConfig(
        vocab_size=10,
        hidden_size=size,
        num_hidden_layers=1,
        num_attention_heads=1,
        intermediate_size=8,
        attn_implementation="eager",
    )
    model = BertModel(config).eval()
    attention = model.encoder.layer[0].attention.self
    with torch.no_grad():
        attention.query.weight.zero_()
        attention.query.bias.zero_()
        attention.value.weight.copy_(torch.eye(size))
        attention.value.bias.zero_()
    norms = previous_layer_norms(attention_weights(model), torch.randn(1, tokens, size))
    torch.testing.assert_close(norms, torch.full((1, 1, tokens, tokens), math.sqrt(size) / tokens))
    torch.testing.assert_close(normalize_rows(norms), torch.full((1, 1, tokens, tokens), 1 / tokens))


@pytest.mark.slow
def test_estimator_is_unbiased(model, hidden):
    exact = input_norms(model, hidden[0][0], HtaMethod(None)) ** 2
    single = input_norms(model, hidden[0][0], HtaMethod(2)) ** 2
    torch.testing.assert_close(single[0], exact[0])  # first layer: exact closed form
    exact = exact[1:]
    draws = torch.stack(
        [
            input_norms(model, hidden[0][0], HtaMethod(2), torch.Generator().manual_seed(seed))[1:] ** 2
            for seed in range(300)
        ]
    )
    relative = (draws.mean(0) - exact).abs() / exact
    assert relative.mean() < 0.02 and relative.max() < 0.1
    assert (draws.std(0) / exact).mean() > 0.05  # single draws do vary: the test can fail


def test_bf16_probes_stay_close_to_float32(model, hidden):
    full = input_norms(model, hidden[0][0], HtaMethod(4), torch.Generator().manual_seed(3))
    half = input_norms(model, hidden[0][0], HtaMethod(4, bf16=True), torch.Generator().manual_seed(3))
    assert half.dtype == torch.float32
    assert ((half - full).abs() / full)[1:].median() < 0.02  # same probes: only rounding differs


def test_more_probes_track_exact_better(model, hidden):
    few = estimate_error(model, [hidden[0][0]], HtaMethod(1), [0])
    some = estimate_error(model, [hidden[0][0]], HtaMethod(8), [0])
    assert some.mean_abs_error < few.mean_abs_error
    # D orthonormal probes per token span the whole space: the estimate is exact.
    full = estimate_error(model, [hidden[0][0]], HtaMethod(16), [0])
    assert full.mean_abs_error < 1e-6 and full.layer_pearson[2] == pytest.approx(1.0, abs=1e-6)


def test_estimate_error_scores_estimated_layers_one_by_one(model, hidden):
    # Layer 1 is exact in every mode, so pooling it in flatters the estimator: the check scores
    # layers 2..L alone, each against the same cells of exact HTA (seeded as the run seeds them).
    e0, other = hidden[0][0], torch.randn(N - 2, 16, generator=torch.Generator().manual_seed(5))
    error = estimate_error(model, [e0, other], HtaMethod(1), [7, 8])
    exact = [normalize_rows(input_norms(model, x, HtaMethod(None))) for x in (e0, other)]
    estimated = [
        normalize_rows(input_norms(model, x, HtaMethod(1), torch.Generator().manual_seed(seed)))
        for x, seed in ((e0, 7), (other, 8))
    ]
    cells = lambda maps, layer: torch.cat([m[layer].flatten() for m in maps])  # noqa: E731
    reference = torch.corrcoef(torch.stack([cells(exact, 1), cells(estimated, 1)]))[0, 1]
    assert list(error.layer_pearson) == [2]
    assert error.layer_pearson[2] == pytest.approx(float(reference), abs=1e-6)
    assert error.mean_abs_error == pytest.approx(float((cells(exact, 1) - cells(estimated, 1)).abs().mean()))
    pooled = torch.corrcoef(
        torch.stack([torch.cat([m.flatten() for m in exact]), torch.cat([m.flatten() for m in estimated])])
    )[0, 1]
    assert float(pooled) > error.layer_pearson[2]  # what the old pooled check reported
    assert estimate_error(model, [e0], HtaMethod(None), [0]).layer_pearson == {}


def test_row_correlations_on_known_rows():
    attention = torch.tensor([[0.7, 0.2, 0.1], [0.1, 0.3, 0.6]])
    pearson, spearman = row_correlations(attention, attention)
    assert pearson.item() == pytest.approx(1.0) and spearman.item() == pytest.approx(1.0)
    reversed_rows = torch.tensor([[0.1, 0.2, 0.7], [0.6, 0.3, 0.1]])
    _, spearman = row_correlations(attention, reversed_rows)
    assert spearman.item() == pytest.approx(-1.0)
    pearson, _ = row_correlations(torch.tensor([[0.5, 0.3, 0.2]]), torch.tensor([[0.6, 0.3, 0.1]]))
    assert pearson.item() == pytest.approx(0.9972, abs=1e-4)  # 0.07667 / (0.21602 * 0.35590)


def test_method_names():
    assert str(HtaMethod.parse("estimate(8)")) == "estimate(8)" and HtaMethod.parse("exact").probes is None
    assert HtaMethod.parse("estimate(4,bf16)") == HtaMethod(4, bf16=True)
    with pytest.raises(ValueError, match="expected 'exact', 'estimate"):
        HtaMethod.parse("estimate(0)")


def test_check_sample_spans_the_length_range():
    # 40 examples, example i has 40 - i tokens: 4 strata of 10 by length, one example from each
    # (not the shortest few, which the old check took).
    tokens = pl.DataFrame({"example_id": [i for i in range(40) for _ in range(40 - i)]})
    chosen = check_sample(tokens, 4, seed=3)
    lengths = sorted(40 - i for i in chosen)
    assert len(chosen) == 4 and [(n - 1) // 10 for n in lengths] == [0, 1, 2, 3]
    assert check_sample(tokens, 4, seed=3) == chosen  # seeded
    assert len({tuple(check_sample(tokens, 4, seed)) for seed in range(5)}) > 1
    assert sorted(check_sample(tokens.filter(pl.col("example_id") < 3), 16, seed=0)) == [
        0,
        1,
        2,
    ]  # all of a small corpus
