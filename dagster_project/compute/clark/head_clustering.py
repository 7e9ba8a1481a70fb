"""Clark et al. §6: Jensen-Shannon divergence between the attention distributions of every pair of heads.

JS(Pa, Pb) = H(M) - (H(Pa) + H(Pb)) / 2 with M = (Pa + Pb) / 2 (nats), so only the mixture entropy is
pairwise; each head's own entropy is summed over rows once. The divergence sums are stored per head
pair in `head_distances` and embedded in 2-D by MDS (Clark Fig. 6). Clark used the sums as distances;
the embedding here uses the mean per query token (sum / token count) instead: MDS is scale-equivariant,
so the layout is Clark's up to scale, and its units (nats) do not grow with the corpus.

Clark §6 cites Kruskal (1964), "Multidimensional scaling by optimizing goodness of fit to a nonmetric
hypothesis": non-metric MDS, which fits only the rank order of the distances (the embedding's distances
are a monotone function of them, its scale arbitrary), is the default; metric MDS, which fits the
distances themselves, is the option `metric` (the head_mds run config's `metric_mds`).
"""

import math
from dataclasses import dataclass

import numpy as np
import polars as pl
import torch

from dagster_project.compute.compiled import CompiledFunction
from dagster_project.compute.devices import scratch_bytes, sum_dtype


def _entropy_sums(probabilities: torch.Tensor, log_buffer: torch.Tensor) -> torch.Tensor:
    """Entropy in nats over the last axis, 0*log(0) := 0. Clamping to the smallest normal number before
    the log avoids log(0) and subnormals, both of which make torch's log several times slower."""
    torch.clamp_min(probabilities, torch.finfo(probabilities.dtype).tiny, out=log_buffer).log_()
    return -torch.linalg.vecdot(probabilities, log_buffer)


def _block_s_log_s(block: torch.Tensor, rest: torch.Tensor) -> torch.Tensor:
    """(k, m) sums over rows and keys of s log s, s = block[:, i] + rest[:, j]: block (rows, k, keys) and
    rest (rows, m, keys), lifted above 0. Per-row sums in the rows' dtype, summed over rows in float64."""
    s = block[:, :, None, :] + rest[:, None, :, :]
    return (s * torch.log(s)).sum(-1).sum(0, dtype=torch.float64)


# Compiled, the add, log, multiply and sum are one pass that writes nothing back: bound by the
# logarithms alone, several times faster than the eager loop on 2 CPU cores (docs/benchmarks.md).
_FUSED_BLOCK_S_LOG_S = CompiledFunction(_block_s_log_s)
# Heads per fused call: a block's pairs with itself are computed in both orders, so small blocks waste
# little (4 of 72 heads: 3%), and on 2 cores 4 to 8 were as fast as any.
FUSED_BLOCK_HEADS = 4
# Below this many (row, pair, key) terms in a batch the eager loop is done in about the time the
# compiled kernel takes to load from Inductor's cache, so small batches (tests, toy corpora) stay eager.
FUSED_MIN_TERMS = 2**28


def _add_fused_pair_sums(lifted: torch.Tensor, pair_s_log_s: torch.Tensor) -> None:
    """Add each pair's sum of s log s over `lifted` (rows, heads, keys) into the upper triangle of
    `pair_s_log_s`: one compiled call per block of heads against the heads from the block on (the block's
    pairs with itself also land on and below the diagonal, which is not read)."""
    n_heads = lifted.shape[1]
    for start in range(0, n_heads - 1, FUSED_BLOCK_HEADS):
        block = slice(start, start + FUSED_BLOCK_HEADS)
        pair_s_log_s[block, start:] += _FUSED_BLOCK_S_LOG_S(lifted[:, block], lifted[:, start:])


def _add_eager_pair_sums(
    lifted: torch.Tensor, pair_s_log_s: torch.Tensor, sums_buffer: torch.Tensor, log_buffer: torch.Tensor
) -> None:
    """As _add_fused_pair_sums, one head at a time against the heads after it, through the buffers."""
    rows, n_heads, width = lifted.shape
    for head in range(n_heads - 1):
        shape = (rows, n_heads - head - 1, width)
        s = sums_buffer[: math.prod(shape)].view(shape)
        logs = log_buffer[: s.numel()].view(shape)
        torch.add(lifted[:, head + 1 :], lifted[:, head : head + 1], out=s)
        torch.log(s, out=logs)
        pair_s_log_s[head, head + 1 :] += logs.mul_(s).sum(-1).sum(0, dtype=pair_s_log_s.dtype)


def _mass_sums(rows: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """(heads,) sums of (rows, heads, keys) over rows and keys, every term in `dtype`, a block of rows of
    devices.scratch_bytes at a time: cast at once, a layer's rows make a fresh buffer (~40 MB for 32
    MiniLM examples) whose page faults took ~6x as long as the sum on 2 CPU cores."""
    block = max(1, scratch_bytes(rows.device) // max(1, rows[0].numel() * torch.finfo(dtype).bits // 8))
    sums = torch.zeros(rows.shape[1], dtype=dtype, device=rows.device)
    for start in range(0, rows.shape[0], block):
        sums += rows[start : start + block].sum((0, 2), dtype=dtype)
    return sums


class QueryRows:
    """A batch's real query rows of every head side by side, (rows, L*H, keys), filled one layer at a time:
    what head_js_divergence reduces. The attention pass fills it as the forward finishes each layer, so it
    keeps these rows (the maps' padded query rows left out) instead of every layer's whole maps.

    `valid`: (B, T) bool, real tokens. `storage`: a flat tensor to hold the rows in when large enough (a
    pass reuses one batch's for the next: a fresh buffer of ~100 MB per batch costs its page faults every
    time). Each layer's rows are stored lifted above 0 (see head_js_divergence); each head's entropy and
    mass are summed over the rows as its layer comes, in devices.sum_dtype.
    """

    def __init__(
        self, valid: torch.Tensor, n_layers: int, n_heads: int, dtype: torch.dtype, storage: torch.Tensor | None = None
    ) -> None:
        if valid.dim() != 2 or valid.dtype != torch.bool:
            raise ValueError(f"QueryRows: valid must be a (B, T) bool mask, got {valid.dtype} {tuple(valid.shape)}")
        self.valid, self.n_layers, self.n_heads = valid, n_layers, n_heads
        self.example_index, self.query_index = valid.nonzero(as_tuple=True)
        width = valid.shape[1]
        shape = (self.example_index.numel(), n_layers * n_heads, width)
        size = math.prod(shape)
        reusable = storage is not None and storage.numel() >= size
        reusable = reusable and storage.dtype == dtype and storage.device == valid.device
        self.storage = storage if reusable else torch.empty(size, dtype=dtype, device=valid.device)
        self.lifted = self.storage[:size].view(shape)
        total = sum_dtype(valid.device)
        self.head_entropy = torch.zeros(n_layers * n_heads, dtype=total, device=valid.device)
        self.head_mass = torch.zeros(n_layers * n_heads, dtype=total, device=valid.device)
        self.layers_added = 0
        # Where real row r of head h lies in a layer's maps viewed as (B * H * T, T): add gathers the rows
        # into one buffer per batch (a fresh ~20 MB tensor per layer, as indexing makes, cost page faults).
        heads = torch.arange(n_heads, device=valid.device)
        first_rows = (self.example_index * n_heads)[:, None] + heads
        self._flat_rows = (first_rows * width + self.query_index[:, None]).reshape(-1)
        self._rows = torch.empty((shape[0], n_heads, width), dtype=dtype, device=valid.device)
        self._logs = torch.empty_like(self._rows)  # one layer's logarithms

    def add(self, layer: int, attn: torch.Tensor) -> None:
        """Layer `layer`'s (B, H, T, T) maps (0-based; columns over padded keys 0)."""
        batch, width = self.valid.shape
        if attn.shape != (batch, self.n_heads, width, width):
            raise ValueError(
                f"QueryRows.add: layer maps must be (B, H, T, T) = ({batch}, {self.n_heads}, {width}, {width}), "
                f"got {tuple(attn.shape)}"
            )
        heads = slice(layer * self.n_heads, (layer + 1) * self.n_heads)
        rows = self._rows
        torch.index_select(attn.reshape(-1, width), 0, self._flat_rows, out=rows.view(-1, width))
        self.head_entropy[heads] = _entropy_sums(rows, self._logs).sum(0, dtype=self.head_entropy.dtype)
        self.head_mass[heads] = _mass_sums(rows, self.head_mass.dtype)
        # Padded keys hold 0 in both rows; half the smallest normal number keeps their s log s at 0 (to
        # ~1e-36) without a clamp pass, and keeps subnormals, which slow torch's log several times, out.
        torch.add(rows, torch.finfo(rows.dtype).tiny / 2, out=self.lifted[:, heads])
        self.layers_added += 1

    def divergences(self, chunk_bytes: int | None = None, fused: bool | None = None) -> torch.Tensor:
        """head_js_divergence of the rows of every layer (each added once)."""
        if self.layers_added != self.n_layers:
            raise ValueError(f"QueryRows: {self.layers_added} layers added of {self.n_layers}")
        return _pair_divergences(self.lifted, self.head_entropy, self.head_mass, chunk_bytes, fused)


def head_js_divergence(
    attn: torch.Tensor, valid: torch.Tensor, chunk_bytes: int | None = None, fused: bool | None = None
) -> torch.Tensor:
    """Sums over a batch's real query rows of the JS divergence between every two heads' rows.

    attn: (B, L, H, T, T) attention maps whose columns over padded keys are 0; valid: (B, T) bool,
    real tokens, on attn's device. Returns (L*H, L*H) float64 (float32 on MPS) on that device, head index =
    layer * H + head (0-based), symmetric with a zero diagonal. Per-row sums are taken in attn's dtype and
    summed over rows in float64 (devices.sum_dtype). The real query rows are gathered first (QueryRows, as
    big as the maps' real rows); `chunk_bytes` bounds each chunk's pairwise buffers (rows x heads x keys);
    default: devices.scratch_bytes, cache-sized on a CPU, large on a GPU.

    With s = p + q, the mixture m = s / 2 has sum m log m = (sum s log s - log 2 * sum s) / 2. Head a's
    pairs with the heads after it are one broadcast add, a log and a multiply over (rows, heads, keys): no
    gathers, and the logarithms (one per row, pair and key, which exact JS cannot avoid) dominate.
    `fused`: those three and the sum as one torch.compile kernel per block of FUSED_BLOCK_HEADS heads
    (default: on a CPU, for batches of at least FUSED_MIN_TERMS terms; a GPU runs the eager loop, since
    the compiled kernel has not been measured there).
    """
    if attn.dim() != 5 or attn.shape[-1] != attn.shape[-2]:
        raise ValueError(f"head_js_divergence: attn must be (B, L, H, T, T), got shape {tuple(attn.shape)}")
    batch, layers, heads, width, _ = attn.shape
    if valid.shape != (batch, width) or valid.dtype != torch.bool:
        raise ValueError(
            f"head_js_divergence: valid must be a bool (B, T) = ({batch}, {width}) mask, "
            f"got {valid.dtype} {tuple(valid.shape)}"
        )
    rows = QueryRows(valid, layers, heads, attn.dtype)
    for layer in range(layers):
        rows.add(layer, attn[:, layer])
    return rows.divergences(chunk_bytes, fused)


def _pair_divergences(
    lifted: torch.Tensor,
    head_entropy: torch.Tensor,
    head_mass: torch.Tensor,
    chunk_bytes: int | None,
    fused: bool | None,
) -> torch.Tensor:
    """head_js_divergence from the lifted rows (rows, heads, keys) and each head's entropy and mass sums."""
    n_rows, n_heads, width = lifted.shape
    device = lifted.device
    chunk_bytes = chunk_bytes or scratch_bytes(device)
    rows_per_chunk = max(1, chunk_bytes // (max(1, n_heads - 1) * width * lifted.element_size()))
    if fused is None:
        terms = n_rows * n_heads * (n_heads - 1) // 2 * width
        fused = device.type == "cpu" and terms >= FUSED_MIN_TERMS

    pair_s_log_s = torch.zeros(n_heads, n_heads, dtype=head_entropy.dtype, device=device)
    # Reused buffers of the eager loop: fresh multi-MB allocations per chunk would cost page faults on
    # every chunk.
    sums_buffer, log_buffer = (
        lifted.new_empty(0 if fused else rows_per_chunk * max(1, n_heads - 1) * width) for _ in range(2)
    )
    for start in range(0, n_rows, rows_per_chunk):
        chunk = lifted[start : start + rows_per_chunk]
        if fused:
            _add_fused_pair_sums(chunk, pair_s_log_s)
        else:
            _add_eager_pair_sums(chunk, pair_s_log_s, sums_buffer, log_buffer)

    first, second = torch.triu_indices(n_heads, n_heads, offset=1, device=device)
    mixture_entropy = -0.5 * (pair_s_log_s[first, second] - math.log(2.0) * (head_mass[first] + head_mass[second]))
    js = (mixture_entropy - 0.5 * (head_entropy[first] + head_entropy[second])).clamp_min(0.0)
    distances = torch.zeros(n_heads, n_heads, dtype=head_entropy.dtype, device=device)
    distances[first, second] = js
    distances[second, first] = js
    return distances


def distance_rows(js_sums: torch.Tensor, tokens: int, heads: int) -> pl.DataFrame:
    """`head_distances` rows (without model_id/corpus) of a head_js_divergence matrix summed over a
    corpus: one row per unordered pair, head a before head b, 1-based layers and heads."""
    js_sums = js_sums.cpu()
    first, second = torch.triu_indices(js_sums.shape[0], js_sums.shape[0], offset=1, device=js_sums.device)
    return pl.DataFrame(
        {
            "layer_a": (first // heads + 1).numpy(),
            "head_a": (first % heads + 1).numpy(),
            "layer_b": (second // heads + 1).numpy(),
            "head_b": (second % heads + 1).numpy(),
            "js_sum": js_sums[first, second].numpy(),
            "tokens": np.full(first.numel(), tokens),
        },
        schema={
            "layer_a": pl.Int16,
            "head_a": pl.Int16,
            "layer_b": pl.Int16,
            "head_b": pl.Int16,
            "js_sum": pl.Float64,
            "tokens": pl.Int64,
        },
    )


@dataclass(frozen=True)
class HeadDistances:
    heads: pl.DataFrame  # layer, head: the matrix's row order
    js_mean: np.ndarray  # (n, n) JS divergence per query token, nats; symmetric, zero diagonal


def distance_matrix(rows: pl.DataFrame) -> HeadDistances:
    """The symmetric matrix of mean JS divergences per token (js_sum / tokens) from `head_distances`
    rows holding each pair of heads in either or both orders."""
    heads = (
        pl.concat([rows.select(layer="layer_a", head="head_a"), rows.select(layer="layer_b", head="head_b")])
        .unique()
        .sort("layer", "head")
    )
    numbered = heads.with_row_index("index")
    pairs = rows.join(numbered, left_on=["layer_a", "head_a"], right_on=["layer", "head"]).join(
        numbered, left_on=["layer_b", "head_b"], right_on=["layer", "head"], suffix="_b"
    )
    index_a, index_b = pairs["index"].to_numpy(), pairs["index_b"].to_numpy()
    js_mean = np.full((heads.height, heads.height), np.nan)
    np.fill_diagonal(js_mean, 0.0)
    values = (pairs["js_sum"] / pairs["tokens"]).to_numpy()
    js_mean[index_a, index_b] = values
    js_mean[index_b, index_a] = values
    missing = int(np.isnan(js_mean).sum()) // 2
    if missing:
        raise ValueError(
            f"head_distances covers {heads.height} heads but lacks {missing} of their pairs: "
            "rematerialize the attention facts of the corpus so that every pair of heads gets a row."
        )
    return HeadDistances(heads, js_mean)


@dataclass(frozen=True)
class HeadEmbedding:
    xy: np.ndarray  # (n, 2)
    stress: float  # Kruskal's Stress-1 (against the disparities when non-metric): 0 perfect, 0.05 good, 0.2 poor
    metric: bool  # metric MDS (True) or Kruskal's non-metric MDS


def classical_start(distances: np.ndarray, components: int = 2) -> np.ndarray:
    """Classical (Torgerson) MDS of a distance matrix: the top eigenvectors of the double-centred
    squared distances scaled by the root of their eigenvalues, negative eigenvalues (distances no
    Euclidean configuration has) clipped to 0 where scikit-learn's ClassicalMDS gives NaN; each
    column's largest entry made positive, so the start does not depend on the solver's signs."""
    n = distances.shape[0]
    centring = np.eye(n) - 1.0 / n
    values, vectors = np.linalg.eigh(-0.5 * centring @ (distances**2) @ centring)
    top = np.argsort(values)[::-1][:components]
    vectors = vectors[:, top]
    vectors *= np.sign(vectors[np.abs(vectors).argmax(0), np.arange(components)])
    return vectors * np.sqrt(values[top].clip(min=0.0))


def embed_heads(distances: np.ndarray, metric: bool = False) -> HeadEmbedding:
    """MDS (SMACOF) of a precomputed distance matrix into 2-D, non-metric (Kruskal's, Clark §6) unless
    `metric`, started from classical MDS: deterministic (no seed), exact for distances of a planar
    configuration, and in tests as low a stress as the best of several random starts, which converge
    slowly. Non-metric MDS reads a zero off the diagonal (two identical heads) as a missing distance."""
    # imported here so the compute layer runs where only torch, transformers and polars are installed
    from sklearn.manifold import MDS

    # init="classical_mds" names the start; the array given to fit_transform is that start, made NaN-free
    mds = MDS(n_components=2, metric_mds=metric, metric="precomputed", init="classical_mds", normalized_stress=True)
    xy = mds.fit_transform(distances, init=classical_start(distances))
    return HeadEmbedding(xy, float(mds.stress_), metric)
