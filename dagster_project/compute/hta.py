"""Hidden Token Attribution (Pascual et al. §4), pure torch.

For the output o of head h at token j of layer l (the head's context vector before the
output projection), the contribution of token i of an earlier representation e is
    c_ji = ||d o_j / d e_i||_F / sum_k ||d o_j / d e_k||_F.
- previous-layer contribution (e = the layer's input): closed form, below;
- input contribution (e = the embedding output e^0): forward-mode AD through the encoder,
  exactly (one tangent per input coordinate) or estimated with k probes per input token,
  E ||J v||^2 = ||J||_F^2 when E[v v^T] = I (the first layer, where e^0 is the layer's
  input, always takes the exact closed form).
"""

import math
import re
from dataclasses import dataclass
from functools import lru_cache

import torch
from torch import nn
from torch.func import jvp, vmap
from transformers import PreTrainedModel

PROBE_CHUNK = 128  # tangents per vectorized jvp call


@dataclass(frozen=True)
class HtaMethod:
    """`exact`, or `estimate(k)`: k orthogonal probes per input token; `estimate(k,bf16)`
    runs the probes' matrix products in bfloat16 (about 2x faster on CPUs with bf16 units;
    its error is far below the estimator's, and the run's check measures both)."""

    probes: int | None  # None: exact
    bf16: bool = False

    @classmethod
    def parse(cls, text: str) -> "HtaMethod":
        if text == "exact":
            return cls(None)
        match = re.fullmatch(r"estimate\((\d+)(,\s*bf16)?\)", text)
        if not match or int(match[1]) < 1:
            raise ValueError(f"hta_method {text!r}: expected 'exact', 'estimate(k)' or 'estimate(k,bf16)' with k >= 1")
        return cls(int(match[1]), bool(match[2]))

    def __str__(self) -> str:
        return "exact" if self.probes is None else f"estimate({self.probes}{',bf16' if self.bf16 else ''})"


@dataclass(frozen=True)
class AttentionWeights:
    """Q/K/V projections of every layer stacked: W (L, H, D, dh), b (L, H, dh)."""

    query: tuple[torch.Tensor, torch.Tensor]
    key: tuple[torch.Tensor, torch.Tensor]
    value: tuple[torch.Tensor, torch.Tensor]
    scaling: float

    def first_layer(self) -> "AttentionWeights":
        first = lambda pair: (pair[0][:1], pair[1][:1])  # noqa: E731
        return AttentionWeights(first(self.query), first(self.key), first(self.value), self.scaling)


@lru_cache(maxsize=4)
def attention_weights(model: PreTrainedModel) -> AttentionWeights:
    """Stack the self-attention projections of a BERT-family encoder (query/key/value Linear)."""
    layers = [layer.attention.self for layer in _encoder_layers(model)]
    heads, size = layers[0].num_attention_heads, layers[0].attention_head_size

    def stacked(name: str) -> tuple[torch.Tensor, torch.Tensor]:
        linears: list[nn.Linear] = [getattr(layer, name) for layer in layers]
        weight = torch.stack([linear.weight.detach() for linear in linears])  # (L, H*dh, D)
        bias = torch.stack([linear.bias.detach() for linear in linears])
        return weight.view(len(layers), heads, size, -1).transpose(-1, -2), bias.view(len(layers), heads, size)

    return AttentionWeights(stacked("query"), stacked("key"), stacked("value"), size**-0.5)


def _encoder_layers(model: PreTrainedModel) -> nn.ModuleList:
    layers = getattr(getattr(model, "encoder", None), "layer", None)
    if layers is None or not all(
        hasattr(layer.attention.self, name) for layer in layers for name in ("query", "key", "value")
    ):
        raise NotImplementedError(
            f"HTA needs a BERT-family encoder (encoder.layer[i].attention.self.query/key/value); "
            f"{type(model).__name__} is laid out differently."
        )
    return layers


def previous_layer_norms(weights: AttentionWeights, hidden: torch.Tensor) -> torch.Tensor:
    """||d o_j / d x_i||_F for every layer, head, j, i, in closed form. hidden: (L, n, D) layer inputs.

    With q, k, v the head's projections of x, A = softmax(s q k^T), o_j = sum_k A_jk v_k,
    g_j = s W_K q_j and r_j = W_V^T g_j:
      i != j:  J_ji = A_ji (W_V^T + (v_i - o_j) g_j^T), so
               ||J_ji||^2 = A_ji^2 (||W_V||^2 + 2 (v_i - o_j).r_j + ||v_i - o_j||^2 ||g_j||^2);
      i == j:  J_jj adds s C_j W_Q^T with C_j = sum_k A_jk v_k (k_k - kbar_j)^T (q_j moves too).
    Returns (L, H, n, n) with queries j on dim -2.
    """
    (wq, bq), (wk, bk), (wv, bv) = weights.query, weights.key, weights.value
    x = hidden[:, None]  # (L, 1, n, D)
    q, k, v = x @ wq + bq[:, :, None], x @ wk + bk[:, :, None], x @ wv + bv[:, :, None]  # (L, H, n, dh)
    attn = torch.softmax(weights.scaling * q @ k.transpose(-1, -2), dim=-1)
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


def context_function(model: PreTrainedModel):
    """e0 (1, n, D) -> stacked head outputs of every layer, (L, n, H, dh)."""
    layers = _encoder_layers(model)
    heads, size = layers[0].attention.self.num_attention_heads, layers[0].attention.self.attention_head_size
    captured: list[torch.Tensor] = []

    def capture(_module, _inputs, output):
        captured.append(output[0])

    def contexts(e0: torch.Tensor) -> torch.Tensor:
        captured.clear()
        handles = [layer.attention.self.register_forward_hook(capture) for layer in layers]
        try:
            model.encoder(e0)
        finally:
            for handle in handles:
                handle.remove()
        stacked = torch.stack(captured)[:, 0]  # (L, n, H*dh)
        return stacked.view(*stacked.shape[:2], heads, size)

    return contexts


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


def input_norms(
    model: PreTrainedModel, e0: torch.Tensor, method: HtaMethod, generator: torch.Generator | None = None
) -> torch.Tensor:
    """||d o_j / d e0_i||_F for every layer, head, j, i (estimated for estimate(k)).

    e0: (n, D) embedding output of one example. Returns (L, H, n, n).
    """
    n_tokens, width = e0.shape
    if method.probes is None:
        tangents = torch.eye(n_tokens * width, device=e0.device).view(n_tokens * width, n_tokens, width)
        per_token = width
    else:
        # Drawn on the CPU (the same probes on every device), then moved to e0's.
        generator = generator or torch.Generator().manual_seed(0)
        tangents = orthogonal_probes(n_tokens, width, method.probes, generator).to(e0.device)
        per_token = method.probes
    contexts = context_function(model)
    primal = e0[None]
    with torch.no_grad(), torch.autocast(e0.device.type, dtype=torch.bfloat16, enabled=method.bf16):
        outputs = vmap(lambda tangent: jvp(contexts, (primal,), (tangent[None],))[1], chunk_size=PROBE_CHUNK)(tangents)
    outputs = outputs.float()
    # outputs: (T, L, n_j, H, dh); tangents are grouped by input token i. Summed over a
    # token's probes, ||J v||^2 is exact for unit tangents and unbiased for the probes.
    squared = (outputs * outputs).sum(-1).view(n_tokens, per_token, *outputs.shape[1:4]).sum(1)  # (i, L, j, H)
    norms = squared.permute(1, 3, 2, 0).sqrt()  # (L, H, j, i)
    if method.probes is not None:
        # e^0 is the first layer's input: there the closed form is exact and costs nothing.
        norms[0] = previous_layer_norms(attention_weights(model).first_layer(), e0[None])[0]
    return norms


def row_correlations(attn: torch.Tensor, contributions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean over query rows of the Pearson and Spearman correlation of attention and
    contribution rows. (..., n, n) each -> two (...) tensors."""

    def pearson(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        a, b = a - a.mean(-1, keepdim=True), b - b.mean(-1, keepdim=True)
        return ((a * b).sum(-1) / (a.norm(dim=-1) * b.norm(dim=-1))).mean(-1)

    def ranks(x: torch.Tensor) -> torch.Tensor:
        return x.argsort(-1).argsort(-1).to(x.dtype)

    return pearson(attn, contributions), pearson(ranks(attn), ranks(contributions))


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


def estimate_error(
    model: PreTrainedModel, embeddings: list[torch.Tensor], method: HtaMethod, seeds: list[int]
) -> EstimateError:
    """Estimated (probes seeded per example, as the run draws them) vs exact input contributions
    of the examples' embedding outputs ((n, D) each), per estimated layer 2..L."""
    if method.probes is None:
        return EstimateError({}, 0.0)
    exact, estimated = [], []
    for e0, seed in zip(embeddings, seeds, strict=True):
        exact.append(normalize_rows(input_norms(model, e0, HtaMethod(None))))
        estimated.append(normalize_rows(input_norms(model, e0, method, torch.Generator().manual_seed(seed))))
    return compare_contributions(exact, estimated)
