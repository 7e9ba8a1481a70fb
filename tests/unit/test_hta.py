"""HTA on tiny random BERTs against brute-force Jacobians and analytic cases."""

import math

import polars as pl
import pytest
import scipy.stats
import torch
from transformers import BertConfig, BertModel

from dagster_project.compute.pascual.hta import (
    HtaMethod,
    attention_weights,
    average_ranks,
    compare_contributions,
    input_norms,
    jackknife_gap_errors,
    normalize_rows,
    previous_layer_norms,
    published_gaps,
    published_quantities,
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


def estimate_error(model, embeddings: list[torch.Tensor], method: HtaMethod, seeds: list[int]):
    """Estimated (probes seeded per example, as the run draws them) vs exact input contributions."""
    exact = [normalize_rows(input_norms(model, e0, HtaMethod(None))) for e0 in embeddings]
    estimated = [
        normalize_rows(input_norms(model, e0, method, torch.Generator().manual_seed(seed)))
        for e0, seed in zip(embeddings, seeds, strict=True)
    ]
    return compare_contributions(exact, estimated)


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


def test_row_correlations_on_known_rows():
    attention = torch.tensor([[0.7, 0.2, 0.1], [0.1, 0.3, 0.6]])
    pearson, spearman, rows = row_correlations(attention, attention)
    assert pearson.item() == pytest.approx(1.0) and spearman.item() == pytest.approx(1.0) and rows.item() == 2
    reversed_rows = torch.tensor([[0.1, 0.2, 0.7], [0.6, 0.3, 0.1]])
    _, spearman, _ = row_correlations(attention, reversed_rows)
    assert spearman.item() == pytest.approx(-1.0)
    pearson, _, _ = row_correlations(torch.tensor([[0.5, 0.3, 0.2]]), torch.tensor([[0.6, 0.3, 0.1]]))
    assert pearson.item() == pytest.approx(0.9972, abs=1e-4)  # 0.07667 / (0.21602 * 0.35590)


def test_spearman_shares_ranks_between_ties():
    # ranks (2, 0.5, 0.5) against (2, 1, 0): centered (1, -0.5, -0.5) and (1, 0, -1), so
    # 1.5 / (sqrt(1.5) sqrt(2)) = sqrt(3) / 2; ties broken by position gave 1.0 or 0.5
    attention, contribution = torch.tensor([[0.5, 0.25, 0.25]]), torch.tensor([[0.6, 0.3, 0.1]])
    _, spearman, _ = row_correlations(attention, contribution)
    assert spearman.item() == pytest.approx(math.sqrt(3) / 2)
    assert spearman.item() == pytest.approx(scipy.stats.spearmanr(attention[0], contribution[0]).statistic)
    assert average_ranks(torch.tensor([0.3, 0.1, 0.3, 0.3, 0.2])).tolist() == [3.0, 0.0, 3.0, 3.0, 1.0]


def test_a_row_without_a_correlation_is_dropped_not_its_map():
    # one head's map, three query rows: the second row's attention is constant (no correlation),
    # the third row's contribution has a NaN; the first row alone gives the map's means
    attention = torch.tensor([[[0.7, 0.2, 0.1], [1 / 3, 1 / 3, 1 / 3], [0.1, 0.3, 0.6]]])
    contribution = torch.tensor([[[0.5, 0.3, 0.2], [0.2, 0.3, 0.5], [0.1, float("nan"), 0.6]]])
    pearson, spearman, rows = row_correlations(attention, contribution)
    first, _, _ = row_correlations(attention[:, :1], contribution[:, :1])
    assert rows.tolist() == [1] and pearson.item() == pytest.approx(first.item())
    assert spearman.item() == pytest.approx(1.0)  # the first rows rank alike
    assert pearson.item() == pytest.approx(scipy.stats.pearsonr([0.7, 0.2, 0.1], [0.5, 0.3, 0.2]).statistic, abs=1e-6)
    # a map with no such row has no correlation
    pearson, spearman, rows = row_correlations(attention[:, 1:2], contribution[:, 1:2])
    assert rows.item() == 0 and pearson.isnan().item() and spearman.isnan().item()


def test_method_names():
    assert str(HtaMethod.parse("estimate(8)")) == "estimate(8)" and HtaMethod.parse("exact").probes is None
    assert HtaMethod.parse("estimate(4,bf16)") == HtaMethod(4, bf16=True)
    with pytest.raises(ValueError, match="expected 'exact', 'estimate"):
        HtaMethod.parse("estimate(0)")
    assert HtaMethod.parse("hutchpp(16,8,bf16,ends=2)") == HtaMethod(8, True, 16, exact_ends=2)
    assert str(HtaMethod.parse("estimate(4, ends=1)")) == "estimate(4,ends=1)"


def test_exact_ends_take_the_first_and_last_input_tokens_exactly(model, hidden):
    # N = 5 tokens, ends=2: input tokens 0, 1, 3 and 4 exact, token 2 from one probe
    e0 = hidden[0][0]
    exact = input_norms(model, e0, HtaMethod(None))
    ends = input_norms(model, e0, HtaMethod(1, exact_ends=2), torch.Generator().manual_seed(5))
    plain = input_norms(model, e0, HtaMethod(1), torch.Generator().manual_seed(5))
    torch.testing.assert_close(ends[..., [0, 1, 3, 4]], exact[..., [0, 1, 3, 4]], rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(ends[1:, ..., 2], plain[1:, ..., 2])  # the same probe for the middle token
    assert not torch.allclose(plain[1:, ..., 2], exact[1:, ..., 2], rtol=1e-2)
    # more ends than half the tokens: every token exact
    torch.testing.assert_close(input_norms(model, e0, HtaMethod(1, exact_ends=4)), exact, rtol=1e-4, atol=1e-6)


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


def test_published_quantities_of_hand_made_maps():
    # one layer, one head, two tokens. Contribution rows (0.75, 0.25) and (0.5, 0.5): offsets -1, 0,
    # +1 hold 0.5, (0.75 + 0.5) / 2 pairs and 0.25, i.e. 4/11, 5/11, 2/11 of the histogram;
    # center of mass (-4 + 2) / 11. The second row is constant: its correlation is left out, and
    # the first rows both fall, so Pearson and Spearman are 1.
    attention = torch.tensor([[[[0.6, 0.4], [0.3, 0.7]]]])
    contribution = torch.tensor([[[[0.75, 0.25], [0.5, 0.5]]]])
    quantities = published_quantities([attention], [contribution])
    assert quantities.histograms[0, 0].tolist() == pytest.approx([4 / 11, 5 / 11, 2 / 11])
    assert quantities.center_of_mass.tolist() == pytest.approx([-2 / 11])
    assert quantities.pearson.tolist() == pytest.approx([1.0]) and quantities.spearman.tolist() == pytest.approx([1.0])
    # a second, longer example pools its pairs with the first one's per offset: offsets -2..2
    longer = torch.full((1, 1, 3, 3), 1 / 3)
    pooled = published_quantities([attention, torch.eye(3)[None, None]], [contribution, longer])
    # per offset: -2: (1/3) / 1, -1: (0.5 + 2/3) / 3, 0: (1.25 + 1) / 5, +1: (0.25 + 2/3) / 3, +2: (1/3) / 1
    expected = torch.tensor([1 / 3, 3.5 / 9, 0.45, 2.75 / 9, 1 / 3])
    assert pooled.histograms[0, 0].tolist() == pytest.approx((expected / expected.sum()).tolist())


def test_published_gaps_per_estimated_layer():
    # layer 1 alike (exact in every mode); on layer 2 the estimate sharpens the diagonal: histograms
    # 2/7, 3/7, 2/7 (exact) against 0.2, 0.6, 0.2 move 0.5 (2 * 0.4/7 + 1.2/7) = 6/35 of the mass;
    # both are symmetric (center of mass 0) and rank alike (correlations equal)
    attention = torch.tensor([[[[0.6, 0.4], [0.3, 0.7]]], [[[0.9, 0.1], [0.2, 0.8]]]])
    first = torch.tensor([[[0.75, 0.25], [0.5, 0.5]]])
    exact = torch.stack([first, torch.tensor([[[0.6, 0.4], [0.4, 0.6]]])])
    estimated = torch.stack([first, torch.tensor([[[0.75, 0.25], [0.25, 0.75]]])])
    gaps = published_gaps(published_quantities([attention], [exact]), published_quantities([attention], [estimated]))
    assert gaps["histogram_mass"] == {2: pytest.approx(6 / 35)}
    assert gaps["center_of_mass"] == {2: pytest.approx(0.0, abs=1e-7)}
    assert gaps["pearson"] == {2: pytest.approx(0.0, abs=1e-6)} and gaps["spearman"] == {2: pytest.approx(0.0)}


def test_jackknife_gap_errors_of_hand_made_maps():
    # example A as above (layer 2's histogram moves 6/35 of its mass), example B estimated exactly:
    # left out in turn, the gaps are 6/35 (A alone) and 0 (B alone), mean 3/35, so the standard
    # error is sqrt(1/2 * 2 * (3/35)^2) = 3/35
    attention = torch.tensor([[[[0.6, 0.4], [0.3, 0.7]]], [[[0.9, 0.1], [0.2, 0.8]]]])
    first = torch.tensor([[[0.75, 0.25], [0.5, 0.5]]])
    exact = torch.stack([first, torch.tensor([[[0.6, 0.4], [0.4, 0.6]]])])
    estimated = torch.stack([first, torch.tensor([[[0.75, 0.25], [0.25, 0.75]]])])
    errors = jackknife_gap_errors([attention, attention], [exact, exact], [estimated, exact])
    assert errors["histogram_mass"] == {2: pytest.approx(3 / 35)}
    assert errors["center_of_mass"] == {2: pytest.approx(0.0, abs=1e-6)}
    # one example has no spread to measure
    assert math.isnan(jackknife_gap_errors([attention], [exact], [estimated])["histogram_mass"][2])
