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
from dataclasses import dataclass

import torch
from torch.func import jvp, vjp, vmap

from dagster_project.compute.backoff import BackOff

SKETCH_POWER = 1  # J^T J applications per sketch vector; on MiniLM a second one gains less than it costs
# Tangents per jvp call when chosen from memory (chunk_for_memory). An H100 ran a 32-piece MiniLM
# example's exact HTA in 0.35 s at 4096 fp32 tangents per call against 3.76 s at 128.
MAX_CHUNK = 4096
HOST_CHUNK_BYTES = 512 * 2**20  # a chunk's budget on the CPU or MPS, which share memory with the rest of the run
CUDA_FREE_SHARE = 0.5  # of a GPU's free memory, for one chunk
# A chunk's peak bytes per tangent in multiples of that tangent's output (the captured contexts,
# their stack and its squares, the tangents of the running layer's activations). Measured as peak
# RSS on the CPU for MiniLM's shape (D = 384, 12 heads): 5.4x at 12 layers, 7.2x at 6, 14.7x for one
# layer alone (the per-layer replay), so 16 leaves room; a chunk that still runs out is halved.
TANGENT_OVERHEAD = 16


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
    chunk_size: int | None = None,
) -> torch.Tensor:
    """hutchpp(rank, probes) estimate of ||d o_j / d e0_i||_F^2 for every layer, head, j, i:
    exact on each token's sketched rank-`rank` subspace, `probes` probes on its complement.
    contexts: e0 (1, n, D) -> (L, n, H, dh); e0: (n, D). Returns (i, L, j, H) like the plain
    estimator's sums (layer 1 included; the caller replaces it by its closed form). chunk_size:
    tangents per jvp call, None: chosen from the device's free memory (tangent_squared_norms)."""
    with torch.autocast(e0.device.type, dtype=torch.bfloat16, enabled=bf16):
        basis = sketched_subspaces(contexts, e0, rank, generator).to(e0.dtype)
    directions = torch.cat([basis, complement_probes(basis, probes, generator)], dim=-1)  # (n, D, r + k)
    return tangent_squared_norms(
        contexts, e0[None], token_tangents(directions)[:, None], rank + probes, bf16, chunk_size
    )


@dataclass(frozen=True)
class UnitTangents:
    """The one-hot tangents of every coordinate of a primal of `shape`, in the order of its flat index
    (token by token for (..., n, D)), made a chunk at a time: exact HTA's n * D of them never exist
    at once (as an identity matrix they would take (n * D)^2 floats, 9 GiB for 64 pieces of D = 768)."""

    shape: tuple[int, ...]
    dtype: torch.dtype = torch.float32
    device: torch.device = torch.device("cpu")

    def __len__(self) -> int:
        return math.prod(self.shape)

    def __getitem__(self, rows: slice) -> torch.Tensor:
        start, stop, _ = rows.indices(len(self))
        chunk = torch.zeros(stop - start, len(self), dtype=self.dtype, device=self.device)
        chunk[torch.arange(stop - start, device=self.device), torch.arange(start, stop, device=self.device)] = 1
        return chunk.view(stop - start, *self.shape)


def chunk_for_memory(device: torch.device, tangent_bytes: int) -> int:
    """Tangents per jvp call whose outputs (`tangent_bytes` each, TANGENT_OVERHEAD times over) fit
    CUDA_FREE_SHARE of a GPU's free memory (the caching allocator's unused blocks included), or
    HOST_CHUNK_BYTES on the CPU and MPS; between 1 and MAX_CHUNK."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        free += torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
        budget = free * CUDA_FREE_SHARE
    else:
        budget = HOST_CHUNK_BYTES
    return max(1, min(MAX_CHUNK, int(budget // (tangent_bytes * TANGENT_OVERHEAD))))


def _jvp_outputs(
    function: Callable[[torch.Tensor], torch.Tensor], primal: torch.Tensor, tangents: torch.Tensor, bf16: bool
) -> torch.Tensor:
    """J v for each tangent of a chunk, vectorized: (chunk, *output.shape), in primal's dtype."""
    with torch.autocast(primal.device.type, dtype=torch.bfloat16, enabled=bf16):
        outputs = vmap(lambda tangent: jvp(function, (primal,), (tangent,))[1])(tangents)
    return outputs.to(primal.dtype)  # back from bfloat16 autocast


def _add_by_token(total: torch.Tensor, squared: torch.Tensor, start: int, per_token: int) -> None:
    """Add the squared norms of tangents start, start + 1, ... (rows of `squared`) into their input
    tokens' rows of `total`: whole tokens in one sum, a partial token at either end on its own
    (sums in a fixed order, unlike index_add_'s atomics on CUDA)."""
    offset = 0
    while offset < len(squared):
        position = start + offset
        token, within = divmod(position, per_token)
        whole = (len(squared) - offset) // per_token if within == 0 else 0
        if whole:
            rows = squared[offset : offset + whole * per_token]
            total[token : token + whole] += rows.reshape(whole, per_token, *rows.shape[1:]).sum(1)
            offset += whole * per_token
        else:
            taken = min(per_token - within, len(squared) - offset)
            total[token] += squared[offset : offset + taken].sum(0)
            offset += taken


def tangent_squared_norms(
    function: Callable[[torch.Tensor], torch.Tensor],
    primal: torch.Tensor,
    tangents: torch.Tensor | UnitTangents,
    per_token: int,
    bf16: bool = False,
    chunk_size: int | None = None,
    purpose: str = "HTA input contributions",
) -> torch.Tensor:
    """Sum over each input token's tangents of ||J v||^2 (J: function's Jacobian at primal), summed over
    the output's last axis: tangents (n * per_token, *primal.shape), grouped by input token i ->
    (i, *output.shape[:-1]). Exact norms for unit tangents, unbiased for probes with E[sum v v^T] = I.

    The tangents go through J a chunk at a time, each chunk's norms reduced before the next, so the
    peak memory is one chunk's outputs, not all of them. chunk_size: tangents per chunk; None: one
    tangent first, then as many as its output size lets chunk_for_memory fit. A chunk that runs out of
    memory is retried at half the size; at one tangent, a PassOutOfMemory names `purpose` and what to change.
    """
    if chunk_size is not None and chunk_size < 1:
        raise ValueError(f"{purpose}: chunk_size {chunk_size} < 1")
    count = len(tangents)
    chunk = chunk_size or 1
    total: torch.Tensor | None = None
    start = 0
    with torch.no_grad():
        while start < count:
            stop = min(start + chunk, count)
            try:
                outputs = _jvp_outputs(function, primal, tangents[start:stop], bf16)
                tangent_bytes = outputs[0].numel() * outputs.element_size()
                squared = (outputs * outputs).sum(-1)
                del outputs
            except torch.OutOfMemoryError as error:
                squared, reason = None, str(error)  # handled outside the except clause: its traceback holds tensors
            if squared is None:
                detail = f" for a {count // per_token}-token example"
                chunk = _backoff(primal.device, purpose).halved(stop - start, reason, detail)
                continue
            if total is None:
                total = squared.new_zeros(count // per_token, *squared.shape[1:])
            _add_by_token(total, squared, start, per_token)
            if chunk_size is None and start == 0:
                chunk = chunk_for_memory(primal.device, tangent_bytes)
            start = stop
    if total is None:
        raise ValueError(f"{purpose}: no tangents")
    return total


def _backoff(device: torch.device, purpose: str) -> BackOff:
    """How a chunk of tangents that ran out of memory is retried."""
    return BackOff(
        purpose,
        "tangents per jvp call",
        "Lower the corpus max_len (fewer pieces per example), use an estimator hta_method (hutchpp(r,k) or "
        "estimate(k), ',bf16' to halve its products) instead of exact, or run on a device with more memory.",
        device,
    )
