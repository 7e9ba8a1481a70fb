"""Other answers than the attention weight to "how much does token j feed token i" (docs/methods.md §3.9),
pure torch, from the same forward pass as the attention maps.

- `attention`: the weight alpha_ij itself.
- `norm` (Kobayashi et al. 2020): alpha_ij ||f_h(x_j)||, f_h(x) = (x W_V^h + b_V^h) W_O^h the value
  vector through the head's slice of the output projection (the output bias is not part of it),
  row-normalized so that each row sums to 1 like an attention row.
- `rollout` (Abnar and Zuidema 2020): per layer A_hat = 0.5 mean_h(A) + 0.5 I, rows renormalized over
  the real tokens, multiplied through the layers; one map per layer, (B, L, 1, T, T).

The value vectors come from forward hooks on each layer's value projection (compute/attention_layouts.py
says where each family keeps it). ||v W_O^h|| is sqrt(v^T G_h v) with G_h = W_O^h W_O^h^T, the (d_head,
d_head) Gram matrix of the head's slice, so the norms of every (example, layer, head, token) are one
batched product. Padding never enters: padded keys carry no attention, and padded rows are zero.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn
from transformers import PreTrainedModel

from dagster_project.compute.attention_layouts import attention_blocks, attention_layout, unique_modules
from dagster_project.compute.batching import flat, head_grid
from dagster_project.compute.metrics import TokenMasks

WEIGHTINGS = ("attention", "norm", "rollout")
# value_norms.token_class: [CLS] and [SEP], '.' and ',' tokens, and every other real token
TOKEN_CLASSES = ("special", "punct", "content")
ROLLOUT_HEAD = 0  # rollout has one map per layer: its rows carry head 0


def check_weightings(weightings: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """`weightings` in WEIGHTINGS order, attention first (every pass takes the attention rows);
    ValueError naming the known ones for an unknown name."""
    unknown = sorted(set(weightings) - set(WEIGHTINGS))
    if unknown:
        raise ValueError(f"unknown weightings {unknown}; known: {list(WEIGHTINGS)}")
    return tuple(name for name in WEIGHTINGS if name == "attention" or name in weightings)


@dataclass
class ValueCapture:
    """The value projection's output of every layer of one forward, in call order."""

    outputs: list[torch.Tensor] = field(default_factory=list)

    def hook(self, _module: nn.Module, _args: tuple, output: torch.Tensor) -> None:
        self.outputs.append(output)

    def take(self) -> list[torch.Tensor]:
        """The outputs captured since the last take, which starts the next forward's capture."""
        taken, self.outputs = self.outputs, []
        return taken


@contextmanager
def captured_values(model: PreTrainedModel) -> Iterator[ValueCapture]:
    """Forward hooks on every layer's value projection while the block runs (one hook per module: a
    module shared by layers, as ALBERT's, fires once per call, so the outputs stay in call order)."""
    layout = attention_layout(model)
    capture = ValueCapture()
    modules = unique_modules([block.get_submodule(layout.value) for block in attention_blocks(model)])
    handles = [module.register_forward_hook(capture.hook) for module in modules]
    try:
        yield capture
    finally:
        for handle in handles:
            handle.remove()


def output_grams(model: PreTrainedModel, n_heads: int) -> torch.Tensor:
    """Per layer and head the Gram matrix W_O^h W_O^h^T of the output projection's slice that reads
    head h's context: (L, H, d_head, d_head), float32, on the model's device. nn.Linear keeps W^T
    (out, in), so the slice of head h is weight[:, h * d_head : (h + 1) * d_head] and G_h = slice^T slice."""
    layout = attention_layout(model)
    weights = torch.stack([block.get_submodule(layout.output).weight.float() for block in attention_blocks(model)])
    n_layers, d_model, width = weights.shape
    per_head = weights.reshape(n_layers, d_model, n_heads, width // n_heads)
    return torch.einsum("lmhd,lmhe->lhde", per_head, per_head)


def value_norms(values: list[torch.Tensor], grams: torch.Tensor) -> torch.Tensor:
    """||f_h(x_j)|| of every (example, layer, head, token): (B, L, H, T) float32 from each layer's value
    projection outputs (B, T, H * d_head) and output_grams' (L, H, d_head, d_head)."""
    n_layers, n_heads, d_head, _ = grams.shape
    stacked = torch.stack(values, dim=1).float()  # (B, L, T, H * d_head)
    v = stacked.reshape(*stacked.shape[:3], n_heads, d_head)
    squared = torch.einsum("blthd,lhde,blthe->blht", v, grams, v)
    return squared.clamp(min=0).sqrt()


def norm_maps(attn: torch.Tensor, norms: torch.Tensor) -> torch.Tensor:
    """Kobayashi's norm-weighted maps alpha_ij ||f_h(x_j)||, each row divided by its sum (a row whose
    every contribution is 0, as a padded row can be, stays 0). (B, L, H, T, T), (B, L, H, T) -> (B, L, H, T, T)."""
    weighted = attn * norms[..., None, :]
    totals = weighted.sum(-1, keepdim=True)
    return torch.where(totals > 0, weighted / totals.clamp(min=torch.finfo(totals.dtype).tiny), 0.0)


def rollout_maps(attn: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Abnar and Zuidema's attention rollout: per layer l, A_hat_l = 0.5 mean_h(A_l) + 0.5 I over the
    real tokens, rows renormalized over them; rollout_1 = A_hat_1, rollout_l = A_hat_l rollout_(l-1).
    (B, L, H, T, T), (B, T) -> (B, L, 1, T, T): real rows sum to 1 over real keys, padded rows are 0."""
    cells = (valid[:, :, None] & valid[:, None, :]).to(attn.dtype)  # (B, T, T)
    identity = torch.diag_embed(valid.to(attn.dtype))
    mixed = (0.5 * attn.mean(2) + 0.5 * identity[:, None]) * cells[:, None]  # (B, L, T, T)
    totals = mixed.sum(-1, keepdim=True)
    mixed = torch.where(totals > 0, mixed / totals.clamp(min=torch.finfo(totals.dtype).tiny), 0.0)
    rolled = [mixed[:, 0]]
    for layer in range(1, mixed.shape[1]):
        rolled.append(mixed[:, layer] @ rolled[-1])
    return torch.stack(rolled, dim=1)[:, :, None]


def value_norm_columns(norms: torch.Tensor, masks: TokenMasks, example_ids: torch.Tensor) -> dict[str, np.ndarray]:
    """Per (example, layer, head, token class of TOKEN_CLASSES with tokens) the mean ||f_h(x_j)|| over the
    example's tokens of that class and their number, as flat columns (sql/schema/value_norms.sql)."""
    special = masks.cls | masks.sep
    punct = masks.punct & ~special
    classes = torch.stack([special, punct, masks.valid & ~special & ~punct], dim=-1).to(norms.dtype)  # (B, T, C)
    sums = torch.einsum("blht,btc->blhc", norms, classes)
    counts = classes.sum(1)  # (B, C)
    rows, layers, heads = head_grid(*norms.shape[:3], norms.device)
    present = (counts > 0)[:, None, None, :].expand_as(sums)
    b, layer, head, kind = present.nonzero(as_tuple=True)
    columns = flat(
        {
            "example_id": example_ids[b],
            "layer": layers[0, layer, 0],
            "head": heads[0, 0, head],
            "class_index": kind,
            "mean_norm": sums[b, layer, head, kind] / counts[b, kind],
            "n_tokens": counts[b, kind].to(torch.int16),
        }
    )
    columns["token_class"] = np.asarray(TOKEN_CLASSES)[columns.pop("class_index")]
    return columns


@dataclass(frozen=True)
class WeightedMaps:
    """One batch's maps under each weighting of a pass (attention first), and the value norms when
    `norm` is among them."""

    maps: dict[str, torch.Tensor]
    norms: torch.Tensor | None = None


def weighted_maps(
    attn: torch.Tensor,
    weightings: tuple[str, ...],
    valid: torch.Tensor,
    values: list[torch.Tensor],
    grams: torch.Tensor | None,
) -> WeightedMaps:
    """The maps of `weightings` (check_weightings' order) for one batch: attention as it is, norm from the
    captured value outputs and output_grams (needed only then), rollout from the attention maps."""
    maps = {"attention": attn}
    norms = None
    if "norm" in weightings:
        norms = value_norms(values, grams)
        maps["norm"] = norm_maps(attn, norms)
    if "rollout" in weightings:
        maps["rollout"] = rollout_maps(attn, valid)
    return WeightedMaps(maps, norms)
