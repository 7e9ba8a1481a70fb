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


def head_js_divergence(
    attn: torch.Tensor, valid: torch.Tensor, chunk_bytes: int | None = None, fused: bool | None = None
) -> torch.Tensor:
    """Sums over a batch's real query rows of the JS divergence between every two heads' rows.

    attn: (B, L, H, T, T) attention maps whose columns over padded keys are 0; valid: (B, T) bool,
    real tokens, on attn's device. Returns (L*H, L*H) float64 (float32 on MPS) on that device, head index =
    layer * H + head (0-based), symmetric with a zero diagonal. Per-row sums are taken in attn's dtype and
    summed over rows in float64 (devices.sum_dtype). `chunk_bytes` bounds each chunk's pairwise buffers
    (rows x heads x keys); default: devices.scratch_bytes, cache-sized on a CPU, large on a GPU.

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
    n_heads = layers * heads
    chunk_bytes = chunk_bytes or scratch_bytes(attn.device)
    rows_per_chunk = max(1, chunk_bytes // (max(1, n_heads - 1) * width * attn.element_size()))
    example_index, query_index = valid.nonzero(as_tuple=True)
    if fused is None:
        terms = example_index.numel() * n_heads * (n_heads - 1) // 2 * width
        fused = attn.device.type == "cpu" and terms >= FUSED_MIN_TERMS

    total = sum_dtype(attn.device)
    head_entropy = torch.zeros(n_heads, dtype=total, device=attn.device)
    head_mass = torch.zeros(n_heads, dtype=total, device=attn.device)
    pair_s_log_s = torch.zeros(n_heads, n_heads, dtype=total, device=attn.device)
    # Padded keys hold 0 in both rows; half the smallest normal number keeps their s log s at 0 (to ~1e-36)
    # without a clamp pass, and keeps subnormals, which slow torch's log several times, out.
    lift = torch.finfo(attn.dtype).tiny / 2
    # Reused buffers of the eager loop: fresh multi-MB allocations per chunk would cost page faults on
    # every chunk.
    sums_buffer, log_buffer = (
        attn.new_empty(0 if fused else rows_per_chunk * max(1, n_heads - 1) * width) for _ in range(2)
    )
    for start in range(0, example_index.numel(), rows_per_chunk):
        chunk = slice(start, start + rows_per_chunk)
        # Advanced indices around slices put the row dimension first: (rows, L, H, T).
        rows = attn[example_index[chunk], :, :, query_index[chunk], :].reshape(-1, n_heads, width)
        head_entropy += _entropy_sums(rows, torch.empty_like(rows)).sum(0, dtype=total)
        head_mass += rows.sum((0, 2), dtype=total)
        lifted = rows + lift
        if fused:
            _add_fused_pair_sums(lifted, pair_s_log_s)
        else:
            _add_eager_pair_sums(lifted, pair_s_log_s, sums_buffer, log_buffer)

    first, second = torch.triu_indices(n_heads, n_heads, offset=1, device=attn.device)
    mixture_entropy = -0.5 * (pair_s_log_s[first, second] - math.log(2.0) * (head_mass[first] + head_mass[second]))
    js = (mixture_entropy - 0.5 * (head_entropy[first] + head_entropy[second])).clamp_min(0.0)
    distances = torch.zeros(n_heads, n_heads, dtype=total, device=attn.device)
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
