"""Clark et al. §6: Jensen-Shannon divergence between the attention distributions of every pair of heads.

JS(Pa, Pb) = H(M) - (H(Pa) + H(Pb)) / 2 with M = (Pa + Pb) / 2 (nats), so only the mixture entropy is
pairwise; each head's own entropy is summed over rows once.
"""

import torch

# Bytes allowed for one chunk's pairwise mixture tensor (rows x head pairs x keys); peak use is about
# twice this (the mixture and one gathered operand).
MIXTURE_CHUNK_BYTES = 2**28


def head_js_divergence(attn: torch.Tensor, valid: torch.Tensor, chunk_bytes: int = MIXTURE_CHUNK_BYTES) -> torch.Tensor:
    """Sums over a batch's real query rows of the JS divergence between every two heads' rows.

    attn: (B, L, H, T, T) attention maps whose columns over padded keys are 0; valid: (B, T) bool,
    real tokens. Returns (L*H, L*H) float64, head index = layer * H + head (0-based), symmetric with a
    zero diagonal. Per-row entropies are computed in attn's dtype and summed in float64.
    """
    if attn.dim() != 5 or attn.shape[-1] != attn.shape[-2]:
        raise ValueError(f"head_js_divergence: attn must be (B, L, H, T, T), got shape {tuple(attn.shape)}")
    batch, layers, heads, width, _ = attn.shape
    if valid.shape != (batch, width) or valid.dtype != torch.bool:
        raise ValueError(
            f"head_js_divergence: valid must be a bool (B, T) = ({batch}, {width}) mask, got {valid.dtype} {tuple(valid.shape)}"
        )
    n_heads = layers * heads
    first, second = torch.triu_indices(n_heads, n_heads, offset=1)
    rows_per_chunk = max(1, chunk_bytes // (first.numel() * width * attn.element_size()))
    example_index, query_index = valid.nonzero(as_tuple=True)

    head_entropy = torch.zeros(n_heads, dtype=torch.float64)
    mixture_entropy = torch.zeros(first.numel(), dtype=torch.float64)
    for start in range(0, example_index.numel(), rows_per_chunk):
        chunk = slice(start, start + rows_per_chunk)
        # Advanced indices around slices put the row dimension first: (rows, L, H, T).
        rows = attn[example_index[chunk], :, :, query_index[chunk], :].reshape(-1, n_heads, width)
        head_entropy += torch.special.entr(rows).sum(-1).sum(0, dtype=torch.float64)
        mixture = rows[:, first, :]
        mixture.add_(rows[:, second, :]).mul_(0.5)
        mixture_entropy += torch.special.entr(mixture, out=mixture).sum(-1).sum(0, dtype=torch.float64)

    pair_sums = (mixture_entropy - 0.5 * (head_entropy[first] + head_entropy[second])).clamp_min(0.0)
    distances = torch.zeros(n_heads, n_heads, dtype=torch.float64)
    distances[first, second] = pair_sums
    distances[second, first] = pair_sums
    return distances
