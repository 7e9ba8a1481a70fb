"""Where each encoder family keeps its self-attention, declared once per `config.model_type`.

HTA reads a head's context vector (before the output projection) through a forward hook on the
output projection, the previous-layer closed form reads the Q/K/V projections, and head ablation
hooks the probability dropout of families outside transformers' AttentionInterface; all find
these modules here. The weightings that decompose the whole encoder layer (compute/weightings.py:
GlobEnc, ALTI, value zeroing) also read its two LayerNorms and its feed-forward network. Adding a
family is one entry of ATTENTION_LAYOUTS.
"""

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn
from transformers import PreTrainedModel


@dataclass(frozen=True)
class AttentionLayout:
    """One family's module paths. `attention` is relative to a layer module; the projections are
    relative to the attention block, which takes the layer's input as its first argument and
    contains the output projection (so replaying it alone yields that layer's contexts)."""

    layers: Callable[[nn.Module], list[nn.Module]]  # base model -> layer modules in call order (shared repeated)
    attention: str
    query: str
    key: str
    value: str
    output: str  # the output projection Linear: its input is every head's context, (1, n, H*dh)
    # base model, n tokens -> (H, n, n) added to every layer's scores, independent of the input
    score_bias: Callable[[nn.Module, int], torch.Tensor] | None = None
    # scores = q k^T / sqrt(dh) (+ score_bias): previous_layer_norms' closed form holds; else per-layer jvp
    closed_form: bool = True
    # families computing their probabilities outside transformers' AttentionInterface: the dropout those
    # probabilities pass through (its output multiplies the values), where head ablation hooks them
    probability_dropout: str | None = None
    # Post-LN encoder layer, h = LN1(x + attention(x)), out = LN2(h + FFN(h)): the LayerNorms' paths
    # relative to a layer module and FFN(h) without its residual, from the layer module; None for a
    # family whose LayerNorms sit elsewhere, which the layer-decomposing weightings refuse.
    residual_norm: str | None = None
    output_norm: str | None = None
    feed_forward: Callable[[nn.Module, torch.Tensor], torch.Tensor] | None = None


def _bert_feed_forward(layer: nn.Module, hidden: torch.Tensor) -> torch.Tensor:
    """BertLayer.feed_forward_chunk without the output LayerNorm and its residual (BERT, MPNet, DeBERTa-v2)."""
    return layer.output.dense(layer.intermediate(hidden))


def _albert_feed_forward(layer: nn.Module, hidden: torch.Tensor) -> torch.Tensor:
    return layer.ffn_output(layer.activation(layer.ffn(hidden)))


def _at(path: str) -> Callable[[nn.Module], list[nn.Module]]:
    return lambda base: list(base.get_submodule(path))


def _albert_layers(base: nn.Module) -> list[nn.Module]:
    """ALBERT runs group int(i / (L / G)) at layer i: its shared AlbertLayers, once per layer."""
    config = base.config
    groups = base.encoder.albert_layer_groups
    per_group = config.num_hidden_layers / config.num_hidden_groups
    return [
        layer for index in range(config.num_hidden_layers) for layer in groups[int(index / per_group)].albert_layers
    ]


def _mpnet_position_bias(base: nn.Module, n_tokens: int) -> torch.Tensor:
    """MPNet's relative position bias, shared by all layers (MPNetEncoder.compute_position_bias)."""
    positions = torch.empty(1, n_tokens, 0, device=base.encoder.relative_attention_bias.weight.device)
    return base.encoder.compute_position_bias(positions)[0]


_BERT_NORMS = {
    "residual_norm": "attention.output.LayerNorm",
    "output_norm": "output.LayerNorm",
    "feed_forward": _bert_feed_forward,
}
_BERT = AttentionLayout(
    _at("encoder.layer"), "attention", "self.query", "self.key", "self.value", "output.dense", **_BERT_NORMS
)

ATTENTION_LAYOUTS: dict[str, AttentionLayout] = {
    "bert": _BERT,
    "roberta": _BERT,
    "xlm-roberta": _BERT,
    "electra": _BERT,
    "distilbert": AttentionLayout(
        _at("transformer.layer"),
        "attention",
        "q_lin",
        "k_lin",
        "v_lin",
        "out_lin",
        residual_norm="sa_layer_norm",
        output_norm="output_layer_norm",
        feed_forward=lambda layer, hidden: layer.ffn(hidden),
    ),
    "albert": AttentionLayout(
        _albert_layers,
        "attention",
        "query",
        "key",
        "value",
        "dense",
        residual_norm="attention.LayerNorm",
        output_norm="full_layer_layer_norm",
        feed_forward=_albert_feed_forward,
    ),
    "mpnet": AttentionLayout(
        _at("encoder.layer"),
        "attention",
        "attn.q",
        "attn.k",
        "attn.v",
        "attn.o",
        score_bias=_mpnet_position_bias,
        probability_dropout="attn.dropout",
        residual_norm="attention.LayerNorm",
        output_norm="output.LayerNorm",
        feed_forward=_bert_feed_forward,
    ),
    # Disentangled attention: scores also hold q_j . r_(j-i) and k_i . r'_(i-j) terms.
    "deberta-v2": AttentionLayout(
        _at("encoder.layer"),
        "attention",
        "self.query_proj",
        "self.key_proj",
        "self.value_proj",
        "output.dense",
        closed_form=False,
        probability_dropout="self.dropout",
        **_BERT_NORMS,
    ),
}


def attention_layout(model: PreTrainedModel) -> AttentionLayout:
    """The layout of `model`'s family (its config.model_type), or a clear error naming the known ones."""
    model_type = model.config.model_type
    if model_type not in ATTENTION_LAYOUTS:
        raise NotImplementedError(
            f"HTA does not know where {type(model).__name__} (model_type {model_type!r}) keeps its self-attention; "
            f"known families: {', '.join(sorted(ATTENTION_LAYOUTS))}. Add an AttentionLayout for {model_type!r} "
            "to ATTENTION_LAYOUTS in dagster_project/compute/attention_layouts.py."
        )
    return ATTENTION_LAYOUTS[model_type]


def attention_blocks(model: PreTrainedModel) -> list[nn.Module]:
    """Each layer's attention block, in call order (ALBERT's shared block repeated)."""
    layout = attention_layout(model)
    return [layer.get_submodule(layout.attention) for layer in layout.layers(model.base_model)]


def unique_modules(modules: list[nn.Module]) -> list[nn.Module]:
    """`modules` without repeats (a hook goes once on a shared module, which fires once per call)."""
    return list({id(module): module for module in modules}.values())
