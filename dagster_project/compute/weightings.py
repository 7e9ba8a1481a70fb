"""Other answers than the attention weight to "how much does token j feed token i" (docs/methods.md §3.9),
pure torch, from the same forward pass as the attention maps.

- `attention`: the weight alpha_ij itself.
- `norm` (Kobayashi et al. 2020): alpha_ij ||f_h(x_j)||, f_h(x) = (x W_V^h + b_V^h) W_O^h the value
  vector through the head's slice of the output projection (the output bias is not part of it),
  row-normalized so that each row sums to 1 like an attention row.
- `rollout` (Abnar and Zuidema 2020): per layer A_hat = 0.5 mean_h(A) + 0.5 I, rows renormalized over
  the real tokens, multiplied through the layers; one map per layer, (B, L, 1, T, T).

Three more decompose the whole post-LN encoder layer h_i = LN1(y_i), y_i = x_i + sum_j A_ij + b_O,
A_ij = sum_h alpha^h_ij f_h(x_j), out_i = LN2(h_i + FFN(h_i)); one map per layer, rows summing to 1:
- `globenc` (Modarressi et al. 2022): N_ij = ||LN2~(LN1~(A_ij + [i=j] x_i))||, where LNk~(z) =
  gamma_k (z - mean(z)) / sqrt(var(the LayerNorm's real input) + eps), the LayerNorms' share of z
  (the FFN is left out, as in the paper); the layers' N multiplied through as they are, each layer's
  product shown with rows renormalized.
- `alti` (Ferrando et al. 2022): T_i(x_j) = LN1~(A_ij + [i=j] x_i), c_ij = max(0, ||h_i||_1 -
  ||h_i - T_i(x_j)||_1), rows normalized, then multiplied through the layers (rollout without I).
- `value_zeroing` (Mohebbi et al. 2023): the cosine distance between out_i and the layer's output when
  token j's value vector is zeroed in every head, rows normalized; per layer, not rolled out. Zeroing
  v_j takes alpha^h_ij v_j^h out of i's context and leaves the probabilities: y_i becomes y_i - A_ij,
  and every zeroing of a layer is one batched pass of LN1, FFN and LN2 over (example, i, j) rows.

The value vectors, the layers' inputs and their LayerNorms' inputs and outputs come from forward hooks
(compute/attention_layouts.py says where each family keeps them; a family whose LayerNorms it does not
name is refused by the three). ||v W_O^h|| is sqrt(v^T G_h v) with G_h = W_O^h W_O^h^T, the (d_head,
d_head) Gram matrix of the head's slice, so the norms of every (example, layer, head, token) are one
batched product. Padding never enters: padded keys carry no attention, and padded rows are zero.

Beside the maps, a pass keeps the layer's own map of the three that multiply through the layers (rollout's
A_hat, globenc's N, alti's c), so that every weighting can be read per layer and rolled out (aggregated_maps).
"""

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from transformers import PreTrainedModel

from dagster_project.compute.attention_layouts import attention_blocks, attention_layout, unique_modules
from dagster_project.compute.batching import flat, head_grid
from dagster_project.compute.metrics import TokenMasks

WEIGHTINGS = ("attention", "norm", "rollout", "globenc", "alti", "value_zeroing")
# the weightings that decompose the whole encoder layer, from its LayerNorms' captured states
LAYER_DECOMPOSITIONS = ("globenc", "alti", "value_zeroing")
# weightings with one map per layer rather than per head: their rows carry head LAYER_MAP_HEAD
LAYER_WEIGHTINGS = ("rollout", *LAYER_DECOMPOSITIONS)
LAYER_MAP_HEAD = 0
# value_norms.token_class: [CLS], [SEP], '.' and ',' tokens, and every other real token. [CLS] and [SEP]
# apart: MiniLM's [CLS] value vectors are far shorter than its [SEP]'s, which a shared class averages away.
TOKEN_CLASSES = ("cls", "sep", "punct", "content")
# How a weighting's maps are read where they are compared with an attribution to the inputs (GlobEnc's
# two settings): `per_layer`, each layer's own map (local); `rolled_out`, the maps of layers 1..l multiplied
# through (global), as GlobEnc aggregates every map it compares with gradient saliency. rollout, globenc and
# alti roll out as their methods do; ROLLED_BY_PRODUCT by the plain product of their head-averaged maps (GlobEnc
# rolls W and N out so; value zeroing without an added identity, its distances already count the residual).
AGGREGATIONS = ("per_layer", "rolled_out")
ROLLED_BY_PRODUCT = ("attention", "norm", "value_zeroing")
# floats per (example, query row, key, feature) block of the layer decompositions, FFN widening included
DECOMPOSITION_BLOCK = 2**24
FFN_WIDENING = 4  # the families' intermediate size over their hidden size, to size the blocks
# Rows per value-zeroing FFN call on a CPU: their (rows, 4d) intermediate stays in the core's cache. MiniLM's
# FFN alone ran 8x faster on 8,192 rows as 64 calls of 128 than as one call on the shared 2-core CPU; the
# whole value-zeroing pass gained far less (docs/benchmarks.md). A GPU takes the whole block at once.
CPU_ZEROING_ROWS = 128


def check_weightings(weightings: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """`weightings` in WEIGHTINGS order, attention first (every pass takes the attention rows);
    ValueError naming the known ones for an unknown name."""
    unknown = sorted(set(weightings) - set(WEIGHTINGS))
    if unknown:
        raise ValueError(f"unknown weightings {unknown}; known: {list(WEIGHTINGS)}")
    return tuple(name for name in WEIGHTINGS if name == "attention" or name in weightings)


@dataclass(frozen=True)
class LayerStates:
    """One forward's states of every layer, (B, L, T, width) in the forward's dtype: the layer's input x
    and its value projection x W_V + b_V; with the LayerNorms captured, the residual LayerNorm's input
    y and output h and the output LayerNorm's input h + FFN(h) and output (the layer's output)."""

    inputs: torch.Tensor
    values: torch.Tensor
    residual_norm_inputs: torch.Tensor | None = None
    residual_norm_outputs: torch.Tensor | None = None
    output_norm_inputs: torch.Tensor | None = None
    outputs: torch.Tensor | None = None

    def layer(self, index: int) -> "LayerStates":
        """The states of layer `index` alone, (B, 1, T, width)."""
        states = (getattr(self, part.name) for part in fields(self))
        return LayerStates(*(None if layer is None else layer[:, index : index + 1] for layer in states))


@dataclass
class LayerCapture:
    """Per module role, the (input, output) of each call in one forward, in call order."""

    calls: dict[str, list[tuple[torch.Tensor, torch.Tensor]]] = field(default_factory=dict)

    def hook(self, role: str) -> Callable[[nn.Module, tuple, torch.Tensor], None]:
        """A forward hook that records each call's first input and output under `role`."""
        calls = self.calls.setdefault(role, [])
        return lambda _module, args, output: calls.append((args[0], output))

    def take(self) -> LayerStates:
        """The states captured since the last take, which starts the next forward's capture."""

        def stacked(role: str, side: int) -> torch.Tensor | None:
            return torch.stack([call[side] for call in self.calls[role]], dim=1) if role in self.calls else None

        states = LayerStates(
            stacked("value", 0),
            stacked("value", 1),
            stacked("residual_norm", 0),
            stacked("residual_norm", 1),
            stacked("output_norm", 0),
            stacked("output_norm", 1),
        )
        for calls in self.calls.values():
            calls.clear()
        return states


def _refuse_layer_norms(model: PreTrainedModel, weightings: tuple[str, ...]) -> None:
    layout = attention_layout(model)
    if layout.residual_norm is None or layout.output_norm is None or layout.feed_forward is None:
        raise ValueError(
            f"weightings {list(weightings)} decompose a post-LN encoder layer (LayerNorm after the attention's "
            f"residual and after the FFN's); family {model.config.model_type!r} ({type(model).__name__}) names no "
            "such LayerNorms in compute/attention_layouts.py. Leave these weightings out for this model, or give its "
            "AttentionLayout residual_norm, output_norm and feed_forward if its layers are post-LN."
        )


@contextmanager
def captured_layers(model: PreTrainedModel, with_norms: bool = False) -> Iterator[LayerCapture]:
    """Forward hooks on every layer's value projection and, `with_norms`, its two LayerNorms while the
    block runs (one hook per module: a module shared by layers, as ALBERT's, fires once per call, so the
    calls stay in layer order). With norms, a family the layout gives no LayerNorms is refused."""
    layout = attention_layout(model)
    capture = LayerCapture()
    roles = {"value": [block.get_submodule(layout.value) for block in attention_blocks(model)]}
    if with_norms:
        _refuse_layer_norms(model, LAYER_DECOMPOSITIONS)
        layers = layout.layers(model.base_model)
        roles["residual_norm"] = [layer.get_submodule(layout.residual_norm) for layer in layers]
        roles["output_norm"] = [layer.get_submodule(layout.output_norm) for layer in layers]
    handles = [
        module.register_forward_hook(capture.hook(role))
        for role, modules in roles.items()
        for module in unique_modules(modules)
    ]
    try:
        yield capture
    finally:
        for handle in handles:
            handle.remove()


def _output_weights(model: PreTrainedModel, n_heads: int) -> torch.Tensor:
    """Per layer the output projection's weight as (L, d_model, H, d_head), float32 (nn.Linear keeps W^T)."""
    layout = attention_layout(model)
    weights = torch.stack([block.get_submodule(layout.output).weight.float() for block in attention_blocks(model)])
    n_layers, d_model, width = weights.shape
    return weights.reshape(n_layers, d_model, n_heads, width // n_heads)


def output_grams(model: PreTrainedModel, n_heads: int) -> torch.Tensor:
    """Per layer and head the Gram matrix W_O^h W_O^h^T of the output projection's slice that reads
    head h's context: (L, H, d_head, d_head), float32, on the model's device. The slice of head h is
    weight[:, h * d_head : (h + 1) * d_head] and G_h = slice^T slice."""
    per_head = _output_weights(model, n_heads)
    return torch.einsum("lmhd,lmhe->lhde", per_head, per_head)


def value_norms(values: torch.Tensor, grams: torch.Tensor) -> torch.Tensor:
    """||f_h(x_j)|| of every (example, layer, head, token): (B, L, H, T) float32 from the layers' value
    projection outputs (B, L, T, H * d_head) and output_grams' (L, H, d_head, d_head)."""
    n_layers, n_heads, d_head, _ = grams.shape
    v = values.float().reshape(*values.shape[:3], n_heads, d_head)
    squared = torch.einsum("blthd,lhde,blthe->blht", v, grams, v)
    return squared.clamp(min=0).sqrt()


def _rows_normalized(weighted: torch.Tensor) -> torch.Tensor:
    """Each row divided by its sum; a row whose every entry is 0, as a padded row is, stays 0."""
    totals = weighted.sum(-1, keepdim=True)
    return torch.where(totals > 0, weighted / totals.clamp(min=torch.finfo(totals.dtype).tiny), 0.0)


def norm_maps(attn: torch.Tensor, norms: torch.Tensor) -> torch.Tensor:
    """Kobayashi's norm-weighted maps alpha_ij ||f_h(x_j)||, each row divided by its sum (a row whose
    every contribution is 0, as a padded row can be, stays 0). (B, L, H, T, T), (B, L, H, T) -> (B, L, H, T, T)."""
    return _rows_normalized(attn * norms[..., None, :])


def _rolled_on(rolled: torch.Tensor | None, layer_map: torch.Tensor, rescale: bool = False) -> torch.Tensor:
    """One step of a product through the layers: rolled_1 = M_1, rolled_l = M_l rolled_(l-1), over (B, T, T)
    (`rolled` None: M is the first layer's). `rescale`: the product is divided by its example's largest
    entry, which keeps unnormalized maps' products finite and their rows' proportions."""
    if rolled is None:
        return layer_map
    product = layer_map @ rolled
    if rescale:
        product = product / product.amax((-2, -1), keepdim=True).clamp(min=torch.finfo(product.dtype).tiny)
    return product


def rolled_out(per_layer: torch.Tensor, rescale: bool = False) -> torch.Tensor:
    """A product through the layers of per-layer maps (B, L, T, T) (one step: _rolled_on): (B, L, T, T), the
    product of layers 1..l at layer l."""
    rolled = []
    for layer in range(per_layer.shape[1]):
        rolled.append(_rolled_on(rolled[-1] if rolled else None, per_layer[:, layer], rescale))
    return torch.stack(rolled, dim=1)


def _real_cells(valid: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return (valid[:, :, None] & valid[:, None, :]).to(dtype)  # (B, T, T)


def _rollout_layers(attn: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Rollout's per-layer maps A_hat_l = 0.5 mean_h(A_l) + 0.5 I over the real tokens, rows renormalized
    over them: (B, L, H, T, T), (B, T) -> (B, L, T, T)."""
    identity = torch.diag_embed(valid.to(attn.dtype))
    mixed = (0.5 * attn.mean(2) + 0.5 * identity[:, None]) * _real_cells(valid, attn.dtype)[:, None]
    return _rows_normalized(mixed)


def rollout_maps(attn: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Abnar and Zuidema's attention rollout: per layer l, A_hat_l = 0.5 mean_h(A_l) + 0.5 I over the
    real tokens, rows renormalized over them; rollout_1 = A_hat_1, rollout_l = A_hat_l rollout_(l-1).
    (B, L, H, T, T), (B, T) -> (B, L, 1, T, T): real rows sum to 1 over real keys, padded rows are 0."""
    return rolled_out(_rollout_layers(attn, valid))[:, :, None]


@dataclass(frozen=True)
class EncoderLayerParts:
    """What the layer decompositions read of the model besides a forward's states: per layer the output
    projection's weight (L, d_model, H, d_head) float32, the two LayerNorms and FFN(h)."""

    output_weights: torch.Tensor
    residual_norms: list[nn.LayerNorm]
    output_norms: list[nn.LayerNorm]
    feed_forwards: list[Callable[[torch.Tensor], torch.Tensor]]

    def layer(self, index: int) -> "EncoderLayerParts":
        """The parts of layer `index` alone (L = 1)."""
        return EncoderLayerParts(
            self.output_weights[index : index + 1],
            self.residual_norms[index : index + 1],
            self.output_norms[index : index + 1],
            self.feed_forwards[index : index + 1],
        )


def encoder_layer_parts(model: PreTrainedModel, n_heads: int) -> EncoderLayerParts:
    """The EncoderLayerParts of `model`, or the refusal of a family whose LayerNorms the layout does not name."""
    _refuse_layer_norms(model, LAYER_DECOMPOSITIONS)
    layout = attention_layout(model)
    layers = layout.layers(model.base_model)
    return EncoderLayerParts(
        _output_weights(model, n_heads),
        [layer.get_submodule(layout.residual_norm) for layer in layers],
        [layer.get_submodule(layout.output_norm) for layer in layers],
        [lambda hidden, layer=layer: layout.feed_forward(layer, hidden) for layer in layers],
    )


def _layer_norm(inputs: torch.Tensor, norm: nn.LayerNorm) -> torch.Tensor:
    """The LayerNorm in float32 without calling the module (its capture hook stays quiet)."""
    return F.layer_norm(inputs, inputs.shape[-1:], norm.weight.float(), norm.bias.float(), norm.eps)


def _norm_share(parts: torch.Tensor, norm: nn.LayerNorm, norm_inputs: torch.Tensor) -> torch.Tensor:
    """LN~(z) = gamma (z - mean(z)) / sqrt(var(y) + eps) of parts z (B, r, T, d) of the rows' LayerNorm
    inputs y (B, r, d): summed over the parts, with gamma's share of the bias terms and beta, it is LN(y)."""
    scale = torch.rsqrt(norm_inputs.var(-1, unbiased=False) + norm.eps)[:, :, None, None]
    return norm.weight.float() * (parts - parts.mean(-1, keepdim=True)) * scale


def _decomposed_layer(
    attn: torch.Tensor,
    states: LayerStates,
    parts: EncoderLayerParts,
    layer: int,
    weightings: tuple[str, ...],
) -> dict[str, torch.Tensor]:
    """One layer's per-layer matrices (B, T, T) of the LAYER_DECOMPOSITIONS among `weightings`, before any
    masking or normalization: GlobEnc's N_ij, ALTI's c_ij, value zeroing's cosine distances. Built in blocks
    of query rows, each holding (example, row, key, feature) arrays of at most DECOMPOSITION_BLOCK floats."""
    x = states.inputs[:, layer].float()
    y, h = states.residual_norm_inputs[:, layer].float(), states.residual_norm_outputs[:, layer].float()
    out_in, out = states.output_norm_inputs[:, layer].float(), states.outputs[:, layer].float()
    n_batch, n_tokens, d_model = x.shape
    weights = parts.output_weights[layer]  # (d_model, H, d_head)
    values = states.values[:, layer].float().reshape(n_batch, n_tokens, *weights.shape[1:])
    transformed = torch.einsum("bjhe,mhe->bjhm", values, weights)  # f_h(x_j): (B, T, H, d_model)
    residual_norm, output_norm = parts.residual_norms[layer], parts.output_norms[layer]
    maps = {name: x.new_zeros(n_batch, n_tokens, n_tokens) for name in weightings if name in LAYER_DECOMPOSITIONS}
    step = max(1, DECOMPOSITION_BLOCK // (n_batch * n_tokens * d_model * FFN_WIDENING))
    for first in range(0, n_tokens, step):
        rows = slice(first, min(first + step, n_tokens))
        span = torch.arange(rows.stop - rows.start, device=x.device)
        contributions = torch.einsum("bhij,bjhm->bijm", attn[:, layer, :, rows], transformed)  # A_ij
        if "globenc" in maps or "alti" in maps:
            with_residual = contributions.clone()
            with_residual[:, span, span + first] += x[:, rows]
            after_residual_norm = _norm_share(with_residual, residual_norm, y[:, rows])
            if "globenc" in maps:
                after_output_norm = _norm_share(after_residual_norm, output_norm, out_in[:, rows])
                maps["globenc"][:, rows] = after_output_norm.norm(dim=-1)
            if "alti" in maps:
                # ||h||_1 - ||h - T||_1 summed per feature: two sums of hundreds cancel to a few units
                resultant = h[:, rows, None]
                closer = resultant.abs() - (resultant - after_residual_norm).abs()
                maps["alti"][:, rows] = closer.sum(-1).clamp(min=0)
        if "value_zeroing" in maps:
            zeroed_inputs = y[:, rows, None] - contributions  # y_i - A_ij: (B, r, T, d)
            targets = F.normalize(out[:, rows, None], dim=-1).expand_as(zeroed_inputs)
            distances = [
                _zeroing_distances(
                    zeroed, target, residual_norm, output_norm, parts.feed_forwards[layer], states.inputs.dtype
                )
                for zeroed, target in zip(
                    zeroed_inputs.reshape(-1, d_model).split(_zeroing_rows(x.device)),
                    targets.reshape(-1, d_model).split(_zeroing_rows(x.device)),
                )
            ]
            maps["value_zeroing"][:, rows] = torch.cat(distances).reshape(zeroed_inputs.shape[:-1])
    return maps


def _zeroing_rows(device: torch.device) -> int:
    """Rows per LN1-FFN-LN2 call of value zeroing: CPU_ZEROING_ROWS on a CPU, every row of the block elsewhere."""
    return CPU_ZEROING_ROWS if device.type == "cpu" else DECOMPOSITION_BLOCK


def _zeroing_distances(
    zeroed_inputs: torch.Tensor,
    unit_outputs: torch.Tensor,
    residual_norm: nn.LayerNorm,
    output_norm: nn.LayerNorm,
    feed_forward: Callable[[torch.Tensor], torch.Tensor],
    forward_dtype: torch.dtype,
) -> torch.Tensor:
    """1 - cos(LN2(h + FFN(h)), out) of rows (n, d), h = LN1(the zeroed residual stream), against the layer's
    outputs divided by their norms (n, d); the FFN runs in the forward's dtype."""
    zeroed = _layer_norm(zeroed_inputs, residual_norm)
    forward = feed_forward(zeroed.to(forward_dtype)).float()
    # 1 - cos(a, b) as ||a/|a| - b/|b|||^2 / 2: the difference keeps its precision where cos is near 1
    unit_gap = F.normalize(_layer_norm(zeroed + forward, output_norm), dim=-1) - unit_outputs
    return 0.5 * unit_gap.pow(2).sum(-1)


def _decomposition_maps(
    attn: torch.Tensor,
    states: LayerStates,
    parts: EncoderLayerParts,
    cells: torch.Tensor,
    weightings: tuple[str, ...],
    rolled: dict[str, torch.Tensor],
) -> dict[str, torch.Tensor]:
    """One layer's maps (B, 1, 1, T, T) of the LAYER_DECOMPOSITIONS among `weightings` (module docstring)
    from its (B, 1, H, T, T) attention, one-layer states and parts (`cells`: the real (query, key) cells):
    real rows sum to 1 over real keys, padded rows and keys are 0. globenc's and alti's products through
    the layers so far are carried in `rolled`, by name. Second, the layer's own map of those two, rows
    normalized (WeightedMaps.layer_maps)."""
    maps, own = {}, {}
    for name, matrix in _decomposed_layer(attn, states, parts, 0, weightings).items():
        matrix = matrix.clamp(min=0) * cells
        own_map = _rows_normalized(matrix)
        if name == "globenc":
            rolled[name] = _rolled_on(rolled.get(name), matrix, rescale=True)
            own[name] = own_map[:, None, None]
            own_map = _rows_normalized(rolled[name])
        elif name == "alti":
            rolled[name] = _rolled_on(rolled.get(name), own_map)
            own[name] = own_map[:, None, None]
            own_map = rolled[name]
        maps[name] = own_map[:, None, None]
    return maps, own


def value_norm_columns(
    norms: torch.Tensor, masks: TokenMasks, example_ids: torch.Tensor, first_layer: int = 1
) -> dict[str, np.ndarray]:
    """Per (example, layer, head, token class of TOKEN_CLASSES with tokens) the mean ||f_h(x_j)|| over the
    example's tokens of that class and their number, as flat columns (sql/schema/value_norms.sql); `norms`
    (B, L, H, T) are those of the L layers from `first_layer` on."""
    special = masks.cls | masks.sep
    punct = masks.punct & ~special
    content = masks.valid & ~special & ~punct
    classes = torch.stack([masks.cls, masks.sep & ~masks.cls, punct, content], dim=-1).to(norms.dtype)  # (B, T, C)
    sums = torch.einsum("blht,btc->blhc", norms, classes)
    counts = classes.sum(1)  # (B, C)
    rows, layers, heads = head_grid(*norms.shape[:3], norms.device, first_layer)
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
    `norm` is among them. `layer_maps`: the layer's own map of each weighting whose `maps` are products
    through the layers (rollout's A_hat, globenc's N and alti's c, rows normalized), same shape."""

    maps: dict[str, torch.Tensor]
    norms: torch.Tensor | None = None
    layer_maps: dict[str, torch.Tensor] = field(default_factory=dict)

    @property
    def own_maps(self) -> dict[str, torch.Tensor]:
        """Each weighting's maps of each layer alone: `layer_maps` where the weighting rolls out, `maps` elsewhere."""
        return {name: self.layer_maps.get(name, maps) for name, maps in self.maps.items()}


@dataclass
class LayerWeightings:
    """The maps of `weightings` (check_weightings' order) for one batch, a layer at a time in layer order,
    as the forward finishes each: attention as it is, norm from the layer's captured value outputs and
    output_grams, rollout from the attention maps, the layer decompositions from its captured states and
    encoder_layer_parts (states, grams and parts needed only for those). Of the layers before, only the
    products that rollout, globenc and alti carry through the layers are kept, one (B, T, T) each."""

    weightings: tuple[str, ...]
    valid: torch.Tensor  # (B, T) real tokens
    grams: torch.Tensor | None = None
    parts: EncoderLayerParts | None = None
    rolled: dict[str, torch.Tensor] = field(default_factory=dict)

    def layer(self, index: int, attn: torch.Tensor, states: LayerStates | None) -> WeightedMaps:
        """Layer `index`'s maps, (B, 1, H, T, T) per head or (B, 1, 1, T, T) per layer, from its (B, 1, H,
        T, T) attention and its one-layer states; the value norms (B, 1, H, T) when norm is taken."""
        maps = {"attention": attn}
        own: dict[str, torch.Tensor] = {}
        norms = None
        if "norm" in self.weightings:
            norms = value_norms(states.values, self.grams[index : index + 1])
            maps["norm"] = norm_maps(attn, norms)
        if "rollout" in self.weightings:
            own["rollout"] = _rollout_layers(attn, self.valid)[:, :, None]
            self.rolled["rollout"] = _rolled_on(self.rolled.get("rollout"), own["rollout"][:, 0, 0])
            maps["rollout"] = self.rolled["rollout"][:, None, None]
        if set(self.weightings) & set(LAYER_DECOMPOSITIONS):
            cells = _real_cells(self.valid, attn.dtype)
            decomposed, decomposed_own = _decomposition_maps(
                attn, states, self.parts.layer(index), cells, self.weightings, self.rolled
            )
            maps, own = maps | decomposed, own | decomposed_own
        return WeightedMaps({name: maps[name] for name in self.weightings}, norms, own)


def aggregated_maps(weighted: WeightedMaps) -> torch.Tensor:
    """Every weighting's maps, heads averaged, in each of AGGREGATIONS: (B, A, W, L, T, T) from maps of
    (B, L, H or 1, T, T), W in the order of `weighted.maps`; at layer l, `per_layer` is the layer's own map
    and `rolled_out` the product of layers 1..l (AGGREGATIONS says how each weighting rolls out)."""
    own = {name: maps.mean(2) for name, maps in weighted.own_maps.items()}
    rolled = [
        rolled_out(own[name]) if name in ROLLED_BY_PRODUCT else weighted.maps[name].mean(2) for name in weighted.maps
    ]
    return torch.stack([torch.stack(list(own.values()), dim=1), torch.stack(rolled, dim=1)], dim=1)


def weighted_maps(
    attn: torch.Tensor,
    weightings: tuple[str, ...],
    valid: torch.Tensor,
    states: LayerStates | None,
    grams: torch.Tensor | None,
    parts: EncoderLayerParts | None = None,
) -> WeightedMaps:
    """The maps of `weightings` for one batch's (B, L, H, T, T) attention and every layer's states at once
    (LayerWeightings through the layers, stacked)."""
    stepper = LayerWeightings(weightings, valid, grams, parts)
    layers = [
        stepper.layer(index, attn[:, index : index + 1], states.layer(index) if states else None)
        for index in range(attn.shape[1])
    ]
    norms = torch.cat([layer.norms for layer in layers], dim=1) if "norm" in weightings else None
    own = {name: torch.cat([layer.layer_maps[name] for layer in layers], dim=1) for name in layers[0].layer_maps}
    return WeightedMaps(
        {name: torch.cat([layer.maps[name] for layer in layers], dim=1) for name in weightings}, norms, own
    )


@dataclass(frozen=True)
class ModelWeightings:
    """The weightings a pass takes (check_weightings' order) and what they read of the model besides a
    forward: the output projection's Gram matrices for norm, the encoder layer's parts for the layer
    decompositions."""

    weightings: tuple[str, ...]
    grams: torch.Tensor | None
    parts: EncoderLayerParts | None

    @classmethod
    def of(cls, model: PreTrainedModel, weightings: list[str] | tuple[str, ...]) -> "ModelWeightings":
        """Those of `model`: an unknown weighting, or a layer decomposition of a family whose LayerNorms
        the layout does not name, is refused (ValueError) before any forward."""
        chosen = check_weightings(weightings)
        n_heads = model.config.num_attention_heads
        return cls(
            chosen,
            output_grams(model, n_heads) if "norm" in chosen else None,
            encoder_layer_parts(model, n_heads) if set(chosen) & set(LAYER_DECOMPOSITIONS) else None,
        )

    @property
    def needs_norms(self) -> bool:
        """Whether the forward must capture the LayerNorms' inputs and outputs (captured_layers)."""
        return self.parts is not None

    @property
    def needs_states(self) -> bool:
        """Whether the forward must capture any layer state (the value outputs for norm, or the norms')."""
        return "norm" in self.weightings or self.needs_norms

    def stepper(self, valid: torch.Tensor) -> LayerWeightings:
        """The layer-at-a-time maps of one batch with real tokens `valid` (B, T)."""
        return LayerWeightings(self.weightings, valid, self.grams, self.parts)

    def maps(self, attn: torch.Tensor, valid: torch.Tensor, states: LayerStates | None) -> WeightedMaps:
        """Every layer's maps at once (weighted_maps)."""
        return weighted_maps(attn, self.weightings, valid, states, self.grams, self.parts)
