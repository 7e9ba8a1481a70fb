"""hutchpp(r,k): exact on the sketched subspace, unbiased on the rest, exact when r + k = D."""

import pytest
import torch
from transformers import BertConfig, BertModel

from dagster_project.compute.pascual.hta import HtaMethod, input_norms
from dagster_project.compute.pascual.hta_estimators import complement_probes, sketched_squared_norms, token_tangents

WIDTH, TOKENS = 16, 5


@pytest.fixture(scope="module")
def model() -> BertModel:
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=50,
        hidden_size=WIDTH,
        num_hidden_layers=3,
        num_attention_heads=2,
        intermediate_size=32,
        attn_implementation="eager",
    )
    return BertModel(config).eval()


@pytest.fixture(scope="module")
def e0(model: BertModel) -> torch.Tensor:
    with torch.no_grad():
        return model(torch.randint(0, 50, (1, TOKENS)), output_hidden_states=True).hidden_states[0][0]


def test_rank_plus_probes_covering_the_width_is_exact(model, e0):
    exact = input_norms(model, e0, HtaMethod(None))
    for rank, probes in ((12, 4), (1, WIDTH - 1)):
        estimated = input_norms(model, e0, HtaMethod(probes, rank=rank), torch.Generator().manual_seed(3))
        torch.testing.assert_close(estimated, exact, atol=1e-6, rtol=1e-5)


def test_sketched_norms_do_not_depend_on_the_chunk(model, e0):
    method = HtaMethod(3, rank=4)
    automatic = input_norms(model, e0, method, torch.Generator().manual_seed(5))
    for chunk in (1, 6, 7 * TOKENS):  # 6 straddles input tokens (7 tangents each)
        chunked = input_norms(model, e0, method, torch.Generator().manual_seed(5), chunk_size=chunk)
        torch.testing.assert_close(chunked, automatic, atol=1e-6, rtol=1e-5)


def test_estimate_is_unbiased_and_varies():
    # A small nonlinear encoder stand-in, contexts(x)[l] = tanh(A_l x W_l) (D = 6, 3 heads of 2):
    # the mean of seeded draws of hutchpp(2,1) meets the autograd Jacobian's block norms.
    generator = torch.Generator().manual_seed(2)
    width, tokens = 6, 4
    mixing = torch.randn(3, tokens, tokens, generator=generator) / 2
    weights = torch.randn(3, width, width, generator=generator) / 2
    e0 = torch.randn(tokens, width, generator=generator)

    def contexts(x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(mixing @ x @ weights).view(3, tokens, 3, 2)

    jacobian = torch.autograd.functional.jacobian(contexts, e0[None])[..., 0, :, :]  # (L, j, H, dh, i, D)
    exact = jacobian.pow(2).sum((3, 5)).permute(3, 0, 1, 2)  # (i, L, j, H)
    draws = torch.stack(
        [sketched_squared_norms(contexts, e0, 2, 1, torch.Generator().manual_seed(seed)) for seed in range(400)]
    )
    # z-scores of the mean of 400 draws: about N(0, 1) per cell when unbiased; a 10% bias would
    # put a typical cell near z = 4 (single draws vary by about 50%).
    z = (draws.mean(0) - exact) / (draws.std(0) / len(draws) ** 0.5)
    assert z.abs().mean() < 1.1 and z.abs().max() < 4.5
    assert (draws.std(0) / exact).mean() > 0.3  # 3 of 6 directions per draw: single draws differ


def test_low_rank_jacobian_is_exact_from_its_sketch():
    # contexts(x)[l, j] = sum_i A_l[j, i] x_i W_l with W_l = U M_l of rank 3 (D = 8): every token's
    # Jacobian lives in span(U), so the rank-3 sketch finds it and one probe on the complement
    # sees nothing. ||d o_ljh / d x_i||_F^2 = A_l[j, i]^2 ||W_l[:, head h]||_F^2.
    generator = torch.Generator().manual_seed(0)
    width, tokens, heads, size = 8, 4, 2, 3
    basis = torch.randn(width, 3, generator=generator)
    mixing = torch.randn(2, tokens, tokens, generator=generator)
    weights = basis @ torch.randn(2, 3, heads * size, generator=generator)  # (L, D, H*dh)

    def contexts(x: torch.Tensor) -> torch.Tensor:
        return (mixing @ x @ weights).view(2, tokens, heads, size)

    expected = (
        mixing.pow(2).permute(2, 0, 1)[..., None]
        * weights.view(2, width, heads, size).pow(2).sum((1, 3))[None, :, None]
    )  # (i, L, j, H)
    estimated = sketched_squared_norms(contexts, torch.randn(tokens, width, generator=generator), 3, 1, generator)
    torch.testing.assert_close(estimated, expected, atol=1e-5, rtol=1e-4)


def test_complement_probes_are_scaled_orthonormal_frames_outside_the_basis():
    generator = torch.Generator().manual_seed(1)
    basis, _ = torch.linalg.qr(torch.randn(3, WIDTH, 4, generator=generator))
    probes = complement_probes(basis, 6, generator)  # (3, 16, 6)
    torch.testing.assert_close(basis.transpose(-1, -2) @ probes, torch.zeros(3, 4, 6), atol=1e-6, rtol=0)
    # scaled by sqrt((D - r) / k) = sqrt(12 / 6): the frame's v v^T sums to 2 P on average
    torch.testing.assert_close(probes.transpose(-1, -2) @ probes, 2 * torch.eye(6).expand(3, 6, 6))
    with pytest.raises(ValueError, match="rank \\+ probes = 17 exceeds the model width 16"):
        complement_probes(basis[..., :1].expand(3, WIDTH, 11).contiguous(), 6, generator)


def test_token_tangents_place_each_direction_at_its_token():
    directions = torch.arange(2 * 3 * 2, dtype=torch.float32).view(2, 3, 2)  # (n=2, D=3, m=2)
    tangents = token_tangents(directions)
    assert tangents.shape == (4, 2, 3)
    torch.testing.assert_close(tangents[1], torch.tensor([[1.0, 3.0, 5.0], [0.0, 0.0, 0.0]]))
    torch.testing.assert_close(tangents[2], torch.tensor([[0.0, 0.0, 0.0], [6.0, 8.0, 10.0]]))


def test_method_names_round_trip():
    method = HtaMethod.parse("hutchpp(16,8,bf16)")
    assert method == HtaMethod(8, bf16=True, rank=16) and str(method) == "hutchpp(16,8,bf16)"
    assert str(HtaMethod.parse("hutchpp(4, 2)")) == "hutchpp(4,2)"
    assert str(HtaMethod.parse("estimate(8,bf16)")) == "estimate(8,bf16)"
    for text in ("hutchpp(0,8)", "hutchpp(8,0)", "hutchpp(8)"):
        with pytest.raises(ValueError, match="'hutchpp\\(r,k\\)'"):
            HtaMethod.parse(text)
