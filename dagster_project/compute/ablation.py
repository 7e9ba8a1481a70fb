"""Disabling attention heads (Kovaleva §4.6): a disabled head attends uniformly, 1/n to each
of the n real (non-pad) tokens, "maintaining the information flow of the original model".

The hook is an attention function registered with transformers' AttentionInterface (and the
eager mask for it), not forked model code. Many ablation settings share one forward pass:
the batch is repeated once per setting and each copy gets its own (layers, heads) mask of
disabled heads, so the cost is about one forward pass per setting.
"""

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch
from transformers import AttentionInterface, PreTrainedModel
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, eager_mask

ABLATION_ATTENTION = "uniform_head_ablation"


def uniform_ablation_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    disabled_heads: torch.Tensor | None = None,
    **_: object,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Eager attention where, for batch copy s, the heads with disabled_heads[s, layer] attend
    uniformly over the real keys. Without `disabled_heads` it is eager attention exactly.

    query/key/value: (S*B, H, T, d); disabled_heads: (S, L, H) bool; attention_mask: the
    eager additive mask (S*B, 1, T, T) (0 for real keys, the dtype's minimum for pads).
    """
    scores = torch.matmul(query, key.transpose(2, 3)) * (query.size(-1) ** -0.5 if scaling is None else scaling)
    if attention_mask is not None:
        scores = scores + attention_mask
    weights = torch.softmax(scores, dim=-1)
    if disabled_heads is not None:
        layer = getattr(module, "layer_idx", None)
        if layer is None:
            raise ValueError(
                f"{type(module).__name__} has no layer_idx, so the head-ablation hook cannot tell its layer; "
                "ablation supports encoders whose attention modules carry layer_idx (BERT, MiniLM, RoBERTa, ELECTRA)."
            )
        n_settings = disabled_heads.shape[0]
        rows, heads, length = weights.shape[0], weights.shape[1], weights.shape[-1]
        if attention_mask is None:
            valid = torch.ones(rows, 1, 1, length, dtype=weights.dtype, device=weights.device)
        else:
            valid = (attention_mask > torch.finfo(attention_mask.dtype).min / 2).to(weights.dtype)
        uniform = valid / valid.sum(-1, keepdim=True)
        disabled = disabled_heads[:, layer].repeat_interleave(rows // n_settings, dim=0).view(rows, heads, 1, 1)
        weights = torch.where(disabled, uniform, weights)
    weights = torch.nn.functional.dropout(weights, p=dropout, training=module.training)
    output = torch.matmul(weights, value).transpose(1, 2).contiguous()
    return output, weights


AttentionInterface.register(ABLATION_ATTENTION, uniform_ablation_attention)
ALL_MASK_ATTENTION_FUNCTIONS.register(ABLATION_ATTENTION, eager_mask)


@dataclass(frozen=True)
class AblationSettings:
    """Setting 0 disables nothing (the baseline); then one head at a time; then one layer at a time."""

    disabled: torch.Tensor  # (S, L, H) bool
    layer: list[int | None]  # 1-based; None for the baseline
    head: list[int | None]  # 1-based; None for the baseline and whole-layer settings


def ablation_settings(n_layers: int, n_heads: int) -> AblationSettings:
    eye_heads = torch.eye(n_layers * n_heads, dtype=torch.bool).view(-1, n_layers, n_heads)
    whole_layers = torch.eye(n_layers, dtype=torch.bool)[:, :, None].expand(n_layers, n_layers, n_heads)
    disabled = torch.cat([torch.zeros(1, n_layers, n_heads, dtype=torch.bool), eye_heads, whole_layers])
    layers = [None] + [layer for layer in range(1, n_layers + 1) for _ in range(n_heads)] + list(range(1, n_layers + 1))
    heads = [None] + [head for _ in range(n_layers) for head in range(1, n_heads + 1)] + [None] * n_layers
    return AblationSettings(disabled, layers, heads)


def use_ablation_attention(model: PreTrainedModel) -> PreTrainedModel:
    """Switch a loaded model to the ablation hook (eager attention until heads are disabled)."""
    model.set_attn_implementation(ABLATION_ATTENTION)
    return model


@torch.no_grad()
def ablated_logits(model: PreTrainedModel, inputs: dict[str, torch.Tensor], disabled: torch.Tensor) -> torch.Tensor:
    """Logits (S, B, C) of B examples under S settings of disabled heads, in one forward pass on the
    model's device; returned in float32 on the CPU."""
    if model.config._attn_implementation != ABLATION_ATTENTION:
        raise ValueError(
            f"model uses '{model.config._attn_implementation}' attention: call use_ablation_attention(model) first"
        )
    n_settings, batch = disabled.shape[0], next(iter(inputs.values())).shape[0]
    repeated = {name: tensor.to(model.device).repeat(n_settings, 1) for name, tensor in inputs.items()}
    logits = model(**repeated, disabled_heads=disabled.to(model.device)).logits
    return logits.view(n_settings, batch, -1).float().cpu()


def settings_logits(
    model: PreTrainedModel,
    batches: Iterable[dict[str, torch.Tensor]],
    disabled: torch.Tensor,
    batch_tokens: int,
    progress: Callable[[int, float], None] | None = None,
) -> torch.Tensor:
    """Logits (S, N, C) for every setting over all batches (examples in batch order).

    Settings go through in chunks of batch_tokens // (B * T) (at least 1), so one pass holds
    about batch_tokens padded positions.
    """
    start = time.perf_counter()
    outputs = []
    for index, inputs in enumerate(batches):
        batch, length = inputs["input_ids"].shape
        chunk = max(1, batch_tokens // (batch * length))
        outputs.append(torch.cat([ablated_logits(model, inputs, part) for part in disabled.split(chunk)]))
        if progress is not None:
            progress(index + 1, time.perf_counter() - start)
    return torch.cat(outputs, dim=1)
