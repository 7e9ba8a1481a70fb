"""Hidden Token Attribution (Pascual et al. §4), pure torch.

For the output o of head h at token j of layer l (the head's context vector before the
output projection), the contribution of token i of an earlier representation e is
    c_ji = ||d o_j / d e_i||_F / sum_k ||d o_j / d e_k||_F.
- previous-layer contribution (e = the layer's input): closed form where the scores are
  q k^T / sqrt(dh) plus an input-independent bias, else (DeBERTa's disentangled attention) the
  layer's attention block replayed alone under one jvp per input coordinate;
- input contribution (e = the first layer's input e^0, the embedding output): forward-mode AD
  through the encoder, exactly (one tangent per input coordinate) or estimated with k probes per
  input token, E ||J v||^2 = ||J||_F^2 when E[v v^T] = I (the first layer, where e^0 is the
  layer's input, always takes the exact previous-layer norms). The tangents go through the encoder a
  chunk at a time, sized from the device's free memory, each chunk's norms reduced before the next
  (hta_estimators.tangent_squared_norms).
o is read by a forward hook on the output projection, wherever the family's AttentionLayout
(compute/attention_layouts.py) puts it, and the pass stops at the last layer's (nothing after it is
used); the family's own code computes everything else.
"""

import math
import re
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from functools import lru_cache

import torch
from torch import nn
from transformers import PreTrainedModel

from dagster_project.compute.attention_layouts import attention_blocks, attention_layout, unique_modules
from dagster_project.compute.pascual.hta_estimators import (
    UnitTangents,
    sketched_squared_norms,
    tangent_squared_norms,
)

# Tangents per vectorized jvp call; None: from the device's free memory and the model's output size
# (hta_estimators.chunk_for_memory), halved on running out of memory.
PROBE_CHUNK: int | None = None


@dataclass(frozen=True)
class HtaMethod:
    """`exact`, or `estimate(k)`: k orthogonal probes per input token; `estimate(k,bf16)`
    runs the probes' matrix products in bfloat16 (about 2x faster on CPUs with bf16 units;
    its error is far below the estimator's, and the run's check measures both);
    `hutchpp(r,k)` / `hutchpp(r,k,bf16)`: exact on a sketched rank-r subspace per input token,
    k probes on the rest (compute/pascual/hta_estimators.py). A trailing `,ends=e` (either estimator)
    takes the first and the last e input tokens with unit tangents, exactly: their blocks hold the
    longest offsets, which few pairs share, so their noise moves a histogram's center of mass most."""

    probes: int | None  # None: exact
    bf16: bool = False
    rank: int = 0  # hutchpp: sketched directions per input token taken exactly; 0: plain probes
    exact_ends: int = 0  # input tokens at each end taken exactly

    @classmethod
    def parse(cls, text: str) -> "HtaMethod":
        """The method an `hta_method` setting names: `exact`, `estimate(k)` or `hutchpp(r,k)`, each
        optionally with `,bf16` and `,ends=e`; anything else is a ValueError that lists the accepted
        forms."""
        if text == "exact":
            return cls(None)
        ends = r"(,\s*ends=(\d+))?"
        if match := re.fullmatch(r"estimate\((\d+)(,\s*bf16)?" + ends + r"\)", text):
            if int(match[1]) >= 1:
                return cls(int(match[1]), bool(match[2]), exact_ends=int(match[4] or 0))
        if match := re.fullmatch(r"hutchpp\((\d+),\s*(\d+)(,\s*bf16)?" + ends + r"\)", text):
            if int(match[1]) >= 1 and int(match[2]) >= 1:
                return cls(int(match[2]), bool(match[3]), int(match[1]), int(match[5] or 0))
        raise ValueError(
            f"hta_method {text!r}: expected 'exact', 'estimate(k)', 'estimate(k,bf16)', 'hutchpp(r,k)' or "
            "'hutchpp(r,k,bf16)' with k, r >= 1, each optionally ending in ',ends=e' (e >= 0)"
        )

    def __str__(self) -> str:
        options = (",bf16" if self.bf16 else "") + (f",ends={self.exact_ends}" if self.exact_ends else "")
        if self.probes is None:
            return "exact"
        return f"hutchpp({self.rank},{self.probes}{options})" if self.rank else f"estimate({self.probes}{options})"


@dataclass(frozen=True)
class AttentionWeights:
    """Q/K/V projections of every layer stacked: W (L, H, D, dh), b (L, H, dh); `score_bias`
    (n tokens -> (H, n, n)) is an input-independent term every layer adds to its scores."""

    query: tuple[torch.Tensor, torch.Tensor]
    key: tuple[torch.Tensor, torch.Tensor]
    value: tuple[torch.Tensor, torch.Tensor]
    scaling: float
    score_bias: Callable[[int], torch.Tensor] | None = None

    def first_layers(self, count: int) -> "AttentionWeights":
        """The projections of the first `count` layers alone (those whose previous-layer contributions are
        asked for)."""
        first = lambda pair: (pair[0][:count], pair[1][:count])  # noqa: E731
        return AttentionWeights(first(self.query), first(self.key), first(self.value), self.scaling, self.score_bias)


@lru_cache(maxsize=4)
def attention_weights(model: PreTrainedModel) -> AttentionWeights:
    """Stack the self-attention projections of every layer (as the family's AttentionLayout names them;
    ALBERT's shared layer repeated). Only for layouts whose scores are q k^T / sqrt(dh) plus an
    input-independent bias: others have no closed form (layer_input_norms falls back to per-layer jvp)."""
    layout = attention_layout(model)
    if not layout.closed_form:
        raise NotImplementedError(
            f"{type(model).__name__} ({model.config.model_type}) scores are not q k^T plus an input-independent bias, "
            "so previous_layer_norms' closed form does not apply: use layer_input_norms (exact per-layer jvp)."
        )
    blocks = attention_blocks(model)
    heads = model.config.num_attention_heads

    def stacked(path: str) -> tuple[torch.Tensor, torch.Tensor]:
        linears: list[nn.Linear] = [block.get_submodule(path) for block in blocks]
        weight = torch.stack([linear.weight.detach() for linear in linears])  # (L, H*dh, D)
        bias = torch.stack([linear.bias.detach() for linear in linears])
        return weight.view(len(blocks), heads, -1, weight.shape[-1]).transpose(-1, -2), bias.view(
            len(blocks), heads, -1
        )

    query = stacked(layout.query)
    score_bias = layout.score_bias
    return AttentionWeights(
        query,
        stacked(layout.key),
        stacked(layout.value),
        query[0].shape[-1] ** -0.5,
        None if score_bias is None else lambda n_tokens: score_bias(model.base_model, n_tokens).detach(),
    )


def previous_layer_norms(weights: AttentionWeights, hidden: torch.Tensor) -> torch.Tensor:
    """||d o_j / d x_i||_F for every layer, head, j, i, in closed form. hidden: (L, n, D) layer inputs.

    With q, k, v the head's projections of x, A = softmax(s q k^T + B) (B: the layout's
    input-independent score bias, e.g. MPNet's relative positions), o_j = sum_k A_jk v_k,
    g_j = s W_K q_j and r_j = W_V^T g_j:
      i != j:  J_ji = A_ji (W_V^T + (v_i - o_j) g_j^T), so
               ||J_ji||^2 = A_ji^2 (||W_V||^2 + 2 (v_i - o_j).r_j + ||v_i - o_j||^2 ||g_j||^2);
      i == j:  J_jj adds s C_j W_Q^T with C_j = sum_k A_jk v_k (k_k - kbar_j)^T (q_j moves too).
    Returns (L, H, n, n) with queries j on dim -2.
    """
    (wq, bq), (wk, bk), (wv, bv) = weights.query, weights.key, weights.value
    x = hidden[:, None]  # (L, 1, n, D)
    q, k, v = x @ wq + bq[:, :, None], x @ wk + bk[:, :, None], x @ wv + bv[:, :, None]  # (L, H, n, dh)
    scores = weights.scaling * q @ k.transpose(-1, -2)
    if weights.score_bias is not None:  # input-independent: shifts A, not the form of the Jacobian
        scores = scores + weights.score_bias(hidden.shape[1])
    attn = torch.softmax(scores, dim=-1)
    o = attn @ v
    g = weights.scaling * q @ wk.transpose(-1, -2)  # (L, H, n, D)
    r = g @ wv  # (L, H, n, dh)
    v_sq, o_sq = (v * v).sum(-1), (o * o).sum(-1)
    diff_sq = v_sq[..., None, :] - 2 * o @ v.transpose(-1, -2) + o_sq[..., :, None]  # ||v_i - o_j||^2 at [j, i]
    cross = r @ v.transpose(-1, -2) - (r * o).sum(-1)[..., None]  # (v_i - o_j).r_j at [j, i]
    wv_sq = (wv * wv).sum((-2, -1))[..., None, None]
    squared = attn**2 * (wv_sq + 2 * cross + diff_sq * (g * g).sum(-1)[..., None])
    # Diagonal: J_jj = P + R with P = A_jj (W_V^T + u g^T), u = v_j - o_j (||P||^2 is the
    # formula above at i = j) and R = s C_j W_Q^T; add 2<P, R> + ||R||^2 through dh x dh
    # products: <W_V^T, C W_Q^T> = sum C * (W_Q^T W_V)^T, <u g^T, C W_Q^T> = u.C (W_Q^T g),
    # ||C W_Q^T||^2 = sum (C W_Q^T W_Q) * C.
    covariance = torch.einsum("lhjk,lhka,lhkb->lhjab", attn, v, k) - o[..., :, None] * (attn @ k)[..., None, :]
    a_diag = attn.diagonal(dim1=-2, dim2=-1)
    query_value = wq.transpose(-1, -2) @ wv  # W_Q^T W_V, (L, H, dh, dh)
    query_gram = wq.transpose(-1, -2) @ wq
    query_g = g @ wq  # W_Q^T g_j, (L, H, n, dh)
    u_c_qg = ((v - o)[..., :, None] * covariance * query_g[..., None, :]).sum((-2, -1))
    cross_diag = (covariance * query_value.transpose(-1, -2)[:, :, None]).sum((-2, -1)) + u_c_qg
    r_sq = ((covariance @ query_gram[:, :, None]) * covariance).sum((-2, -1))
    s = weights.scaling
    diagonal = squared.diagonal(dim1=-2, dim2=-1) + 2 * a_diag * s * cross_diag + s * s * r_sq
    squared = squared.diagonal_scatter(diagonal, dim1=-2, dim2=-1)
    return squared.clamp_min(0).sqrt()


def normalize_rows(norms: torch.Tensor) -> torch.Tensor:
    """c_ji = norm_ji / sum_i norm_ji."""
    return norms / norms.sum(-1, keepdim=True)


def _forward_from(model: PreTrainedModel, e0: torch.Tensor) -> None:
    """Run the base model with the first layer's input replaced by e0 (1, n, D) (the ids fed to the
    embeddings are placeholders): every family's own code computes the rest."""
    first = attention_layout(model).layers(model.base_model)[0]
    pending = [True]  # ALBERT's first layer module runs for every layer: replace its first input only

    def replace(_module, args, kwargs):
        if not pending:
            return None
        pending.clear()
        return _with_input(args, kwargs, e0)

    handle = first.register_forward_pre_hook(replace, with_kwargs=True)
    placeholder = torch.zeros(e0.shape[:2], dtype=torch.long, device=e0.device)
    try:
        model.base_model(input_ids=placeholder, attention_mask=torch.ones_like(placeholder))
    finally:
        handle.remove()


def _with_input(args: tuple, kwargs: dict, hidden: torch.Tensor) -> tuple[tuple, dict]:
    """A module call's (args, kwargs) with its hidden-state input (first argument) replaced."""
    if args:
        return (hidden, *args[1:]), kwargs
    return args, {**kwargs, "hidden_states": hidden}


class _ContextsCaptured(Exception):
    """Raised by the capturing pre-hook once the last needed context is in: the rest of the forward
    (the last output projection, feed-forward block, ...) is never used, so it is not run."""


def _capture_contexts(projections: list[nn.Module], captured: list[torch.Tensor], count: int) -> list:
    """Forward pre-hooks appending each output projection's input (every head's context) to `captured`,
    raising _ContextsCaptured at the `count`-th (the caller suppresses it; it never crosses a torch.func
    transform, which only sees the caller's function return)."""

    def capture(_module, args):
        captured.append(args[0])
        if len(captured) == count:
            raise _ContextsCaptured

    return [projection.register_forward_pre_hook(capture) for projection in unique_modules(projections)]


def context_function(model: PreTrainedModel) -> Callable[[torch.Tensor], torch.Tensor]:
    """e0 (1, n, D), the first layer's input -> stacked head outputs of every layer, (L, n, H, dh):
    the input of each layer's output projection, read by a forward pre-hook (any family of
    ATTENTION_LAYOUTS; ALBERT's shared projection fires once per layer, in order)."""
    layout = attention_layout(model)
    projections = [block.get_submodule(layout.output) for block in attention_blocks(model)]
    heads = model.config.num_attention_heads
    captured: list[torch.Tensor] = []

    def contexts(e0: torch.Tensor) -> torch.Tensor:
        captured.clear()
        handles = _capture_contexts(projections, captured, len(projections))
        try:
            with suppress(_ContextsCaptured):
                _forward_from(model, e0)
        finally:
            for handle in handles:
                handle.remove()
        stacked = torch.stack(captured)[:, 0]  # (L, n, H*dh)
        captured.clear()  # the stack is a copy: free the layers' contexts before the caller's reduction
        return stacked.view(*stacked.shape[:2], heads, -1)

    return contexts


def _jacobian_norms(function: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """||d out_j / d x_i||_F exactly, one jvp per coordinate of x (n, D); function: x -> (..., n, H, dh).
    Returns (..., H, j, i)."""
    tangents = UnitTangents(tuple(x.shape), x.dtype, x.device)
    squared = tangent_squared_norms(
        function, x, tangents, x.shape[1], chunk_size=PROBE_CHUNK, purpose="HTA previous-layer contributions"
    )  # (i, ..., j, H)
    return squared.movedim(0, -1).transpose(-2, -3).sqrt()


def replayed_layer_norms(model: PreTrainedModel, hidden: torch.Tensor) -> torch.Tensor:
    """||d o_j / d x_i||_F of each layer w.r.t. its own input, exactly, for any layout: each layer's
    attention block is replayed alone (with the other arguments it got in a forward from hidden[0])
    under one jvp per input coordinate, n * D per layer. hidden: (m, n, D), the inputs of the first m
    layers. Returns (m, H, n, n)."""
    layout = attention_layout(model)
    blocks = attention_blocks(model)[: hidden.shape[0]]
    heads = model.config.num_attention_heads
    calls: list[tuple[tuple, dict]] = []
    handles = [
        block.register_forward_pre_hook(lambda _module, args, kwargs: calls.append((args, kwargs)), with_kwargs=True)
        for block in unique_modules(blocks)
    ]
    try:
        with torch.no_grad():
            _forward_from(model, hidden[:1])
    finally:
        for handle in handles:
            handle.remove()
    norms = []
    for block, (args, kwargs), x in zip(blocks, calls, hidden, strict=False):
        captured: list[torch.Tensor] = []

        def context(x: torch.Tensor, block=block, args=args, kwargs=kwargs, captured=captured) -> torch.Tensor:
            captured.clear()
            handles = _capture_contexts([block.get_submodule(layout.output)], captured, 1)
            try:
                replay_args, replay_kwargs = _with_input(args, kwargs, x[None])
                with suppress(_ContextsCaptured):
                    block(*replay_args, **replay_kwargs)
            finally:
                for handle in handles:
                    handle.remove()
            return captured[0][0].view(x.shape[0], heads, -1)

        norms.append(_jacobian_norms(context, x))
    return torch.stack(norms)


def layer_input_norms(model: PreTrainedModel, hidden: torch.Tensor) -> tuple[torch.Tensor, int]:
    """Previous-layer ||d o_j / d x_i||_F of the first m layers (hidden: their inputs, (m, n, D)):
    the closed form where the family's scores allow it, else the exact per-layer jvp fallback.
    Returns (m, H, n, n) and the number of jvps it took (0 for the closed form)."""
    if attention_layout(model).closed_form:
        return previous_layer_norms(attention_weights(model).first_layers(hidden.shape[0]), hidden), 0
    return replayed_layer_norms(model, hidden), hidden.numel()


def orthogonal_probes(n_tokens: int, width: int, k: int, generator: torch.Generator) -> torch.Tensor:
    """k probes per token, (n*k, n, D): a random orthonormal k-frame scaled by sqrt(D/k), so
    that E[sum of its v v^T] = I, with less variance than k Gaussian probes."""
    device = generator.device
    gaussian = torch.randn(n_tokens, width, k, generator=generator, device=device)
    basis, _ = torch.linalg.qr(gaussian)  # (n, D, k), orthonormal columns
    probes = torch.zeros(n_tokens, k, n_tokens, width, device=device)
    tokens = torch.arange(n_tokens, device=device)
    probes[tokens, :, tokens] = basis.transpose(-1, -2) * math.sqrt(width / k)
    return probes.reshape(n_tokens * k, n_tokens, width)


def _probed_squared_norms(
    model: PreTrainedModel, e0: torch.Tensor, method: HtaMethod, generator: torch.Generator, chunk_size: int | None
) -> torch.Tensor:
    """Sum over each input token's tangents of ||J v||^2, (i, L, j, H): exact for unit tangents
    (exact), unbiased for estimate(k)'s probes."""
    n_tokens, width = e0.shape
    tangents: torch.Tensor | UnitTangents
    if method.probes is None:
        tangents = UnitTangents((1, n_tokens, width), e0.dtype, e0.device)
        per_token = width
    else:
        tangents = orthogonal_probes(n_tokens, width, method.probes, generator).to(e0.device, e0.dtype)[:, None]
        per_token = method.probes
    return tangent_squared_norms(
        context_function(model), e0[None], tangents, per_token, method.bf16, chunk_size
    )  # (i, L, j, H)


def _unit_tangent_squared_norms(
    model: PreTrainedModel, e0: torch.Tensor, tokens: list[int], bf16: bool, chunk_size: int | None
) -> torch.Tensor:
    """||d o_j / d e0_i||_F^2 of the input tokens `tokens` exactly, one unit tangent per coordinate of
    each: (len(tokens), L, j, H), like the estimators' sums."""
    width = e0.shape[1]
    directions = torch.eye(width, dtype=e0.dtype, device=e0.device).expand(len(tokens), width, width)
    tangents = e0.new_zeros(len(tokens), width, *e0.shape)
    tangents[torch.arange(len(tokens), device=e0.device), :, torch.tensor(tokens, device=e0.device)] = directions
    return tangent_squared_norms(
        context_function(model), e0[None], tangents.view(-1, 1, *e0.shape), width, bf16, chunk_size
    )


def input_norms(
    model: PreTrainedModel,
    e0: torch.Tensor,
    method: HtaMethod,
    generator: torch.Generator | None = None,
    first_layer_norms: torch.Tensor | None = None,
    chunk_size: int | None = PROBE_CHUNK,
) -> torch.Tensor:
    """||d o_j / d e0_i||_F for every layer, head, j, i (estimated for estimate(k) and hutchpp(r,k)).

    e0: (n, D) the first layer's input (embedding output) of one example. Returns (L, H, n, n).
    first_layer_norms: the first layer's previous-layer norms (H, n, n) when already computed
    (the estimators take them for layer 1, where they are exact). chunk_size: tangents per jvp
    call (None: chosen from the device's free memory).
    """
    # Probes are drawn on the CPU (the same probes on every device), then moved to e0's.
    generator = generator or torch.Generator().manual_seed(0)
    if method.rank:
        squared = sketched_squared_norms(
            context_function(model), e0, method.rank, method.probes, generator, method.bf16, chunk_size
        )
    else:
        squared = _probed_squared_norms(model, e0, method, generator, chunk_size)
    if method.exact_ends:
        n_tokens, count = e0.shape[0], min(method.exact_ends, e0.shape[0])
        ends = sorted({*range(count), *range(n_tokens - count, n_tokens)})
        squared[ends] = _unit_tangent_squared_norms(model, e0, ends, method.bf16, chunk_size)
    norms = squared.permute(1, 3, 2, 0).sqrt()  # (L, H, j, i)
    if method.probes is not None:
        # e^0 is the first layer's input: there the closed form is exact and costs nothing.
        norms[0] = layer_input_norms(model, e0[None])[0][0] if first_layer_norms is None else first_layer_norms
    return norms


def average_ranks(values: torch.Tensor) -> torch.Tensor:
    """0-based ranks along the last dimension, tied values sharing the mean of their ranks
    (scipy.stats.rankdata's 'average'): between the count of smaller values and that of values
    not larger, minus one."""
    ordered = values.sort(-1).values.contiguous()
    below = torch.searchsorted(ordered, values.contiguous(), side="left")
    not_above = torch.searchsorted(ordered, values.contiguous(), side="right")
    return (below + not_above - 1).to(values.dtype) / 2


def row_correlations(
    attn: torch.Tensor, contributions: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Mean over query rows of the Pearson and Spearman (average ranks for ties, as scipy's)
    correlation of attention and contribution rows, and the number of rows averaged. A row
    without a correlation (constant, or NaN in either row) is left out of its map's mean, the
    other rows kept; a map with none gets NaN. (..., n, n) each -> three (...) tensors."""

    def pearson(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        a, b = a - a.mean(-1, keepdim=True), b - b.mean(-1, keepdim=True)
        return (a * b).sum(-1) / (a.norm(dim=-1) * b.norm(dim=-1))

    by_value = pearson(attn, contributions)
    by_rank = pearson(average_ranks(attn), average_ranks(contributions))
    defined = by_value.isfinite() & by_rank.isfinite()
    rows = defined.sum(-1)

    def mean(values: torch.Tensor) -> torch.Tensor:
        return torch.where(defined, values, 0).sum(-1) / rows

    return mean(by_value), mean(by_rank), rows


# How far an estimator may move each quantity Pascual publishes from the input contributions, per
# layer, from exact HTA's value on the same examples (docs/methods.md §3.6): the mean row Pearson
# and Spearman of Fig. 6 (whose lines are 0.25 and 0.5 apart), the center of mass of Figs. 4-5 in
# tokens, and the share of a head's Fig. 3 histogram that moves (total variation, worst head).
PUBLISHED_TOLERANCES = {"pearson": 0.01, "spearman": 0.01, "center_of_mass": 0.02, "histogram_mass": 0.01}


@dataclass(frozen=True)
class PublishedQuantities:
    """What Pascual publishes from the input contributions of some examples, per layer (dim 0)."""

    pearson: torch.Tensor  # (L,) mean over heads of the head's row Pearson over every row pair (Fig. 6)
    spearman: torch.Tensor  # (L,) the same for Spearman
    center_of_mass: torch.Tensor  # (L,) mean over heads of the head's histogram center of mass (Figs. 4-5)
    histograms: torch.Tensor  # (L, H, 2m + 1) each head's histogram over offsets -m..m, scaled to sum 1 (Fig. 3)


def published_quantities(attention: list[torch.Tensor], contributions: list[torch.Tensor]) -> PublishedQuantities:
    """Pascual's published quantities of examples' attention and input-contribution maps
    ((L, H, n, n) each, n per example): row correlations pooled over the examples' rows (3.6),
    and the relative-position histogram of every (query, key) pair (scope all), each offset's sum
    divided by its pair count (3.2)."""
    reach = max(maps.shape[-1] for maps in contributions) - 1
    layers, heads = contributions[0].shape[:2]
    sums = contributions[0].new_zeros(layers, heads, 2 * reach + 1)
    counts = contributions[0].new_zeros(2 * reach + 1)
    correlation_sums = contributions[0].new_zeros(2, layers, heads)
    rows = contributions[0].new_zeros(layers, heads)
    for attn, contribution in zip(attention, contributions, strict=True):
        pearson, spearman, n_rows = row_correlations(attn, contribution)
        correlation_sums += torch.stack([pearson, spearman]).nan_to_num() * n_rows
        rows += n_rows
        n = contribution.shape[-1]
        positions = torch.arange(n, device=contribution.device)
        offsets = (positions[None, :] - positions[:, None] + reach).flatten()  # key - query, shifted to >= 0
        sums.index_add_(-1, offsets, contribution.flatten(-2))
        counts += torch.bincount(offsets, minlength=counts.numel()).to(counts.dtype)
    histograms = sums / counts.clamp(min=1)
    histograms = histograms / histograms.sum(-1, keepdim=True)
    offsets = torch.arange(-reach, reach + 1, device=sums.device, dtype=sums.dtype)
    correlations = (correlation_sums / rows).mean(-1)
    return PublishedQuantities(correlations[0], correlations[1], (histograms * offsets).sum(-1).mean(-1), histograms)


def published_gaps(exact: PublishedQuantities, estimated: PublishedQuantities) -> dict[str, dict[int, float]]:
    """Per quantity of PUBLISHED_TOLERANCES, per estimated layer 2..L (1-based; layer 1 is exact
    in every mode), how far the estimate lies from exact: the absolute difference, and for the
    histograms the largest share of a head's histogram that moves (half the L1 distance)."""
    moved = 0.5 * (estimated.histograms - exact.histograms).abs().sum(-1).amax(-1)
    gaps = {
        "pearson": (estimated.pearson - exact.pearson).abs(),
        "spearman": (estimated.spearman - exact.spearman).abs(),
        "center_of_mass": (estimated.center_of_mass - exact.center_of_mass).abs(),
        "histogram_mass": moved,
    }
    return {
        name: {layer: float(value) for layer, value in enumerate(gap.tolist()[1:], start=2)}
        for name, gap in gaps.items()
    }


def jackknife_gap_errors(
    attention: list[torch.Tensor], exact: list[torch.Tensor], estimated: list[torch.Tensor]
) -> dict[str, dict[int, float]]:
    """The sampling error of each published gap (published_gaps of the examples' aggregates): its
    jackknife standard error over the examples, sqrt((m - 1) / m * sum_i (gap_-i - mean)^2), gap_-i
    the gap with example i left out. It says how far the gap on m check examples may lie from the
    gap on the examples they were drawn from; NaN for fewer than two examples (no spread to measure)."""
    full = published_gaps(published_quantities(attention, exact), published_quantities(attention, estimated))
    count = len(exact)
    if count < 2:
        return {name: dict.fromkeys(gaps, math.nan) for name, gaps in full.items()}
    left_out = []
    for index in range(count):
        kept = [position for position in range(count) if position != index]

        def pick(maps: list[torch.Tensor], kept: list[int] = kept) -> list[torch.Tensor]:
            return [maps[position] for position in kept]

        left_out.append(
            published_gaps(
                published_quantities(pick(attention), pick(exact)),
                published_quantities(pick(attention), pick(estimated)),
            )
        )
    errors: dict[str, dict[int, float]] = {}
    for name, gaps in full.items():
        errors[name] = {}
        for layer in gaps:
            values = [gaps_without[name][layer] for gaps_without in left_out]
            mean = math.fsum(values) / count
            errors[name][layer] = math.sqrt(math.fsum((value - mean) ** 2 for value in values) * (count - 1) / count)
    return errors


@dataclass(frozen=True)
class EstimateError:
    """How an estimator's input contributions track exact HTA, on the layers it estimates
    (layer 1 takes the exact closed form in every mode, so it is left out)."""

    layer_pearson: dict[int, float]  # 1-based layer -> Pearson over every (example, head, j, i) cell
    mean_abs_error: float  # over the same cells of every estimated layer


def compare_contributions(exact: list[torch.Tensor], estimated: list[torch.Tensor]) -> EstimateError:
    """Per estimated layer 2..L, Pearson and mean absolute error of estimated vs exact
    contributions c_ji of the same examples ((L, H, n, n) each), pooled over the examples."""
    exact_cells = torch.cat([maps[1:].flatten(1) for maps in exact], 1)  # (L - 1, cells)
    estimated_cells = torch.cat([maps[1:].flatten(1) for maps in estimated], 1)
    a = exact_cells - exact_cells.mean(-1, keepdim=True)
    b = estimated_cells - estimated_cells.mean(-1, keepdim=True)
    pearson = (a * b).sum(-1) / (a.norm(dim=-1) * b.norm(dim=-1))
    return EstimateError(
        {layer: float(value) for layer, value in enumerate(pearson.tolist(), start=2)},
        float((exact_cells - estimated_cells).abs().mean()) if exact_cells.numel() else 0.0,
    )
