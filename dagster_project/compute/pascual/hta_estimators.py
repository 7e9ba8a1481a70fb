"""Estimators of HTA's input-contribution block norms ||J_ji||_F^2 beyond plain probes, pure torch.

J_ji = d o_j / d e0_i is the block of the encoder's Jacobian from input token i to every head
output o_j of every layer. Plain probes (`estimate(k)`) draw k orthonormal directions per input
token; their variance comes from the whole spectrum of token i's Gram matrix G_i = sum_j J_ji^T J_ji.

`hutchpp(r,k)` (Meyer et al., "Hutch++", 2021, adapted to many norms sharing one input token):
  1. a sketch of every G_i at once: s = r random tangents over all tokens, pushed through J (jvp)
     and back through J^T (vjp) (SKETCH_POWER times); row i of the result spans token i's dominant input
     directions (J^T J x restricted to token i is G_i x_i plus the other tokens' cross terms, all in
     the row space of J_{.i}), orthonormalised to Q_i (D, r). Two passes per sketch vector, not
     one per token: the sketch costs about 2 * r tangents against n * (r + k) for the rest.
  2. ||J_ji Q_i||_F^2 exactly (r unit tangents per token), plus k orthonormal probes drawn in the
     complement of Q_i and scaled by sqrt((D - r) / k): unbiased for ||J_ji (I - Q_i Q_i^T)||_F^2
     whatever Q_i is (Q_i does not depend on those probes), exact when r + k = D.
On MiniLM a rank-16 sketch leaves about half of each token's energy to the probes, and
hutchpp(16,8) (24 tangents per token) keeps every estimated layer >= 0.99 against exact at 0.8x
the cost of estimate(32) (bench/bench_hta.py).
"""

import math
from collections.abc import Callable

import torch
from torch.func import jvp, vjp, vmap

SKETCH_POWER = 1  # J^T J applications per sketch vector; on MiniLM a second one gains less than it costs


def sketched_subspaces(
    contexts: Callable[[torch.Tensor], torch.Tensor],
    e0: torch.Tensor,
    rank: int,
    generator: torch.Generator,
    skip_layers: int = 1,
    power: int = SKETCH_POWER,
) -> torch.Tensor:
    """Q_i (n, D, rank): an orthonormal basis per input token of the input directions the head
    outputs of layers skip_layers+1..L respond to most (range of (J^T J)^power restricted to
    token i, on `rank` random tangents). contexts: e0 (1, n, D) -> (L, n, H, dh); e0: (n, D)."""
    n_tokens, width = e0.shape
    primal = e0[None]
    # Drawn on the CPU (the same sketch on every device), then moved to e0's.
    sketch = torch.randn(rank, n_tokens, width, generator=generator, device=generator.device).to(e0.device, e0.dtype)
    _, pull_back = vjp(contexts, primal)
    for _ in range(power):
        pushed = vmap(lambda tangent: jvp(contexts, (primal,), (tangent[None],))[1])(sketch)  # (r, L, n, H, dh)
        pushed[:, :skip_layers] = 0  # layers whose norms are exact elsewhere do not steer the subspace
        sketch = vmap(pull_back)(pushed)[0][:, 0]  # (r, n, D)
        sketch = sketch / sketch.flatten(1).norm(dim=1).clamp_min(torch.finfo(sketch.dtype).tiny)[:, None, None]
    basis, _ = torch.linalg.qr(sketch.permute(1, 2, 0))  # (n, D, r)
    return basis.detach()


def complement_probes(basis: torch.Tensor, k: int, generator: torch.Generator) -> torch.Tensor:
    """k probes per token (n, D, k) in the orthogonal complement of each token's basis (n, D, r):
    a random orthonormal k-frame of that complement scaled by sqrt((D - r) / k), so that the sum of
    its v v^T has expectation I - Q Q^T."""
    n_tokens, width, rank = basis.shape
    if rank + k > width:
        raise ValueError(f"hutchpp({rank},{k}): rank + probes = {rank + k} exceeds the model width {width}")
    gaussian = torch.randn(n_tokens, width, k, generator=generator, device=generator.device)
    gaussian = gaussian.to(basis.device, basis.dtype)
    gaussian = gaussian - basis @ (basis.transpose(-1, -2) @ gaussian)
    frame, _ = torch.linalg.qr(gaussian)
    return frame * math.sqrt((width - rank) / k)


def token_tangents(directions: torch.Tensor) -> torch.Tensor:
    """Per-token directions (n, D, m) -> tangents (n * m, n, D), tangent (i, c) = directions[i, :, c]
    placed at token i, grouped by token."""
    n_tokens, width, per_token = directions.shape
    tangents = directions.new_zeros(n_tokens, per_token, n_tokens, width)
    tokens = torch.arange(n_tokens, device=directions.device)
    tangents[tokens, :, tokens] = directions.transpose(-1, -2)
    return tangents.view(n_tokens * per_token, n_tokens, width)


def sketched_squared_norms(
    contexts: Callable[[torch.Tensor], torch.Tensor],
    e0: torch.Tensor,
    rank: int,
    probes: int,
    generator: torch.Generator,
    bf16: bool = False,
    chunk_size: int = 128,
) -> torch.Tensor:
    """hutchpp(rank, probes) estimate of ||d o_j / d e0_i||_F^2 for every layer, head, j, i:
    exact on each token's sketched rank-`rank` subspace, `probes` probes on its complement.
    contexts: e0 (1, n, D) -> (L, n, H, dh); e0: (n, D). Returns (i, L, j, H) like the plain
    estimator's sums (layer 1 included; the caller replaces it by its closed form)."""
    with torch.autocast(e0.device.type, dtype=torch.bfloat16, enabled=bf16):
        basis = sketched_subspaces(contexts, e0, rank, generator).to(e0.dtype)
    directions = torch.cat([basis, complement_probes(basis, probes, generator)], dim=-1)  # (n, D, r + k)
    return tangent_squared_norms(
        contexts, e0[None], token_tangents(directions)[:, None], rank + probes, bf16, chunk_size
    )


def tangent_squared_norms(
    function: Callable[[torch.Tensor], torch.Tensor],
    primal: torch.Tensor,
    tangents: torch.Tensor,
    per_token: int,
    bf16: bool = False,
    chunk_size: int = 128,
) -> torch.Tensor:
    """Sum over each input token's tangents of ||J v||^2 (J: function's Jacobian at primal), summed over
    the output's last axis: tangents (n * per_token, *primal.shape), grouped by input token i ->
    (i, *output.shape[:-1]). Exact norms for unit tangents, unbiased for probes with E[sum v v^T] = I."""
    with torch.no_grad(), torch.autocast(primal.device.type, dtype=torch.bfloat16, enabled=bf16):
        outputs = vmap(lambda tangent: jvp(function, (primal,), (tangent,))[1], chunk_size=chunk_size)(tangents)
    outputs = outputs.to(primal.dtype)  # back from bfloat16 autocast
    return (outputs * outputs).sum(-1).view(-1, per_token, *outputs.shape[1:-1]).sum(1)
