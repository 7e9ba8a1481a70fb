"""Disabling attention heads (Kovaleva §4.6): a disabled head attends uniformly, 1/n to each
of the n real (non-pad) tokens, "maintaining the information flow of the original model".

Not forked model code: encoders whose attention goes through transformers' AttentionInterface
(BERT, RoBERTa, XLM-R, ELECTRA, DistilBERT, ALBERT) get an attention function registered there
(with the eager mask); those computing their probabilities in their own code (MPNet, DeBERTa)
get a forward hook on the dropout their probabilities pass through (their AttentionLayout names
it). Both read which heads to disable from `disabling_heads`, and tell the layer by counting
attention calls: an encoder runs its layers in order, one self-attention each (ALBERT runs its
one shared layer n times, so no module could say its layer). Many ablation settings share one
forward pass: the batch is repeated once per setting and each copy gets its own (layers, heads)
mask of disabled heads, so the cost is about one forward pass per setting. score_ablations runs
the sweep of Figs. 8-9 (nothing, each head, each layer disabled) on a fine-tuned classifier.
"""

import time
import weakref
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import torch
from transformers import AttentionInterface, AutoTokenizer, PreTrainedModel
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, eager_mask

from dagster_project.compute.attention_layouts import attention_blocks, attention_layout, unique_modules
from dagster_project.compute.backoff import BackOff
from dagster_project.compute.devices import ComputeDevice
from dagster_project.compute.kovaleva.finetuning import glue_metrics, load_classifier
from dagster_project.compute.kovaleva.task_data import TaskData, length_sorted_batches, pad_inputs, read_task_split
from dagster_project.compute.models import inspect_model

ABLATION_ATTENTION = "uniform_head_ablation"


@dataclass
class _DisabledHeads:
    """The heads disabled in the forward passes of a `disabling_heads` block."""

    disabled: torch.Tensor  # (S, L, H) bool
    valid: torch.Tensor  # (S*B, T) bool: the real keys of every batch copy
    calls: int = 0  # attention calls so far; call k is layer k % L

    def apply(self, weights: torch.Tensor) -> torch.Tensor:
        """(S*B, H, T, T) attention probabilities with the disabled heads' rows uniform over real keys."""
        n_settings, n_layers = self.disabled.shape[:2]
        layer = self.calls % n_layers
        self.calls += 1
        rows, heads = weights.shape[:2]
        valid = self.valid[:, None, None, :].to(weights.dtype)
        uniform = valid / valid.sum(-1, keepdim=True)
        disabled = self.disabled[:, layer].repeat_interleave(rows // n_settings, dim=0).view(rows, heads, 1, 1)
        return torch.where(disabled, uniform, weights)


_ACTIVE: ContextVar[_DisabledHeads | None] = ContextVar("disabled_heads", default=None)


@contextmanager
def disabling_heads(disabled: torch.Tensor, attention_mask: torch.Tensor) -> Iterator[None]:
    """Within the block, forward passes of a model switched by `use_ablation_attention` disable heads:
    batch copy s (rows s*B .. s*B + B - 1 of the inputs) disables the heads with disabled[s, layer].
    attention_mask (S*B, T): the inputs' mask, 1 for real tokens. Raises when the model made no
    whole number of passes' attention calls (its attention did not reach the hook)."""
    state = _DisabledHeads(disabled.to(torch.bool), attention_mask.to(disabled.device).bool())
    token = _ACTIVE.set(state)
    try:
        yield
    finally:
        _ACTIVE.reset(token)
    if state.calls == 0 or state.calls % disabled.shape[1]:
        raise RuntimeError(
            f"head ablation saw {state.calls} attention calls for a {disabled.shape[1]}-layer model: the model's "
            "attention does not go through the ablation hook (call use_ablation_attention(model) first)."
        )


def uniform_ablation_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    **_: object,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Eager attention, with the heads `disabling_heads` names uniform; outside such a block it is
    eager attention exactly. query/key/value: (S*B, H, T, d); attention_mask: the eager additive mask."""
    scores = torch.matmul(query, key.transpose(2, 3)) * (query.size(-1) ** -0.5 if scaling is None else scaling)
    if attention_mask is not None:
        scores = scores + attention_mask
    weights = torch.softmax(scores, dim=-1)
    if (state := _ACTIVE.get()) is not None:
        weights = state.apply(weights)
    weights = torch.nn.functional.dropout(weights, p=dropout, training=module.training)
    output = torch.matmul(weights, value).transpose(1, 2).contiguous()
    return output, weights


AttentionInterface.register(ABLATION_ATTENTION, uniform_ablation_attention)
ALL_MASK_ATTENTION_FUNCTIONS.register(ABLATION_ATTENTION, eager_mask)


def _ablate_probabilities(_: torch.nn.Module, __: tuple, probabilities: torch.Tensor) -> torch.Tensor:
    """Forward hook on a probability dropout: its output with the disabled heads uniform."""
    state = _ACTIVE.get()
    return probabilities if state is None else state.apply(probabilities)


_HOOKED: "weakref.WeakSet[torch.nn.Module]" = weakref.WeakSet()


@dataclass(frozen=True)
class AblationSettings:
    """Setting 0 disables nothing (the baseline); then one head at a time; then one layer at a time."""

    disabled: torch.Tensor  # (S, L, H) bool
    layer: list[int | None]  # 1-based; None for the baseline
    head: list[int | None]  # 1-based; None for the baseline and whole-layer settings


def ablation_settings(n_layers: int, n_heads: int) -> AblationSettings:
    """Every ablation of a model with `n_layers` x `n_heads` heads: the baseline, then each head alone
    (layer by layer), then each whole layer."""
    eye_heads = torch.eye(n_layers * n_heads, dtype=torch.bool).view(-1, n_layers, n_heads)
    whole_layers = torch.eye(n_layers, dtype=torch.bool)[:, :, None].expand(n_layers, n_layers, n_heads)
    disabled = torch.cat([torch.zeros(1, n_layers, n_heads, dtype=torch.bool), eye_heads, whole_layers])
    layers = [None] + [layer for layer in range(1, n_layers + 1) for _ in range(n_heads)] + list(range(1, n_layers + 1))
    heads = [None] + [head for _ in range(n_layers) for head in range(1, n_heads + 1)] + [None] * n_layers
    return AblationSettings(disabled, layers, heads)


def use_ablation_attention(model: PreTrainedModel) -> PreTrainedModel:
    """Switch a loaded model to the ablation hook (eager attention until heads are disabled)."""
    if model._supports_attention_backend:
        model.set_attn_implementation(ABLATION_ATTENTION)
        return model
    layout = attention_layout(model)
    if layout.probability_dropout is None:
        raise ValueError(
            f"Cannot disable heads of {type(model).__name__} ({model.config.model_type}): its attention goes "
            "through neither transformers' AttentionInterface nor a probability dropout its AttentionLayout "
            "names. Set probability_dropout in its entry of ATTENTION_LAYOUTS (compute/attention_layouts.py)."
        )
    for dropout in unique_modules(
        [block.get_submodule(layout.probability_dropout) for block in attention_blocks(model)]
    ):
        if dropout not in _HOOKED:
            dropout.register_forward_hook(_ablate_probabilities)
            _HOOKED.add(dropout)
    return model


@torch.no_grad()
def ablated_logits(model: PreTrainedModel, inputs: dict[str, torch.Tensor], disabled: torch.Tensor) -> torch.Tensor:
    """Logits (S, B, C) of B examples under S settings of disabled heads, in one forward pass on the
    model's device; returned in float32 on the CPU. The model must be switched by use_ablation_attention."""
    n_settings, batch = disabled.shape[0], next(iter(inputs.values())).shape[0]
    repeated = {name: tensor.to(model.device).repeat(n_settings, 1) for name, tensor in inputs.items()}
    mask = repeated.get("attention_mask", torch.ones_like(repeated["input_ids"]))
    with disabling_heads(disabled.to(model.device), mask):
        logits = model(**repeated).logits
    return logits.view(n_settings, batch, -1).float().cpu()


def settings_logits(
    model: PreTrainedModel,
    batches: Iterable[dict[str, torch.Tensor]],
    disabled: torch.Tensor,
    batch_tokens: int,
    progress: Callable[[int, float], None] | None = None,
) -> torch.Tensor:
    """Logits (S, N, C) for every setting over all batches (examples in batch order).

    One forward pass holds about batch_tokens padded positions: a batch's B examples of width T
    under batch_tokens // (B * T) of the settings (at least 1), or, when batch_tokens is under
    B * T, batch_tokens // T of its examples (at least 1) under one setting.
    """
    start = time.perf_counter()
    outputs = []
    for index, inputs in enumerate(batches):
        batch, length = inputs["input_ids"].shape
        examples = min(batch, max(1, batch_tokens // length))
        chunk = max(1, batch_tokens // (examples * length))
        outputs.append(
            torch.cat(
                [
                    torch.cat([ablated_logits(model, part, settings) for settings in disabled.split(chunk)])
                    for part in _example_parts(inputs, examples)
                ],
                dim=1,
            )
        )
        if progress is not None:
            progress(index + 1, time.perf_counter() - start)
    return torch.cat(outputs, dim=1)


def _example_parts(inputs: dict[str, torch.Tensor], size: int) -> Iterator[dict[str, torch.Tensor]]:
    """A batch's inputs `size` examples at a time, in order."""
    for start in range(0, next(iter(inputs.values())).shape[0], size):
        yield {name: tensor[start : start + size] for name, tensor in inputs.items()}


def validation_logits(
    model: PreTrainedModel,
    validation: TaskData,
    disabled: torch.Tensor,
    *,
    pad_token_id: int,
    with_token_types: bool,
    eval_batch_size: int,
    batch_tokens: int,
    what: str,
    progress: Callable[[int, int, float], None],
) -> torch.Tensor:
    """settings_logits (S, N, C) over a validation split, in its example order, in length-sorted batches of
    `eval_batch_size`; a pass that runs out of device memory starts again at half of `batch_tokens`
    (logged; `what` names the pass), down to one example under one setting (then PassOutOfMemory).
    progress(examples done, examples, seconds)."""
    batches = length_sorted_batches(validation, eval_batch_size)
    backoff = BackOff(
        what,
        "padded positions per forward pass (batch_tokens)",
        "Lower max_len or max_examples in the ablation asset's run config, set ATTN_DTYPE=bfloat16, or run on "
        "a device with more memory (ATTN_DEVICE). Nothing was written.",
        model.device,
        smallest=max(map(len, validation.token_ids)),
    )
    logits = backoff.retrying(
        lambda budget: settings_logits(
            model,
            (pad_inputs(validation, batch, pad_token_id, with_token_types) for batch in batches),
            disabled,
            budget,
            lambda done, seconds: progress(sum(map(len, batches[:done])), len(validation), seconds),
        ),
        batch_tokens,
    )
    in_order = torch.empty_like(logits)
    in_order[:, [index for batch in batches for index in batch]] = logits
    return in_order


@dataclass(frozen=True)
class AblationScores:
    """A fine-tuned classifier's validation scores under every ablation setting (ablation_settings)."""

    rows: pl.DataFrame  # `ablation_scores` rows: one per setting and metric
    gains: pl.DataFrame  # (kind, layer, head, metric, score, delta: score - baseline) of the ablations, largest first
    baseline: dict[str, float]  # the scores with no head disabled
    n_layers: int
    n_heads: int
    n_settings: int
    n_examples: int
    seconds: float  # of the forward passes


def score_ablations(
    tuned_source: str,
    tuned_model_id: str,
    task: str,
    *,
    max_len: int,
    overlong: str,
    max_examples: int | None,
    eval_batch_size: int,
    batch_tokens: int | None,
    data_root: Path,
    compute: ComputeDevice,
    progress: Callable[[int, int, float], None],
) -> AblationScores:
    """Kovaleva Fig. 8-9: the fine-tuned classifier `tuned_source` (partition `tuned_model_id`)
    scored on the validation split of glue_<task> (under `data_root`; its first `max_examples`
    by example_id when given) with nothing, each head and each layer disabled.
    `eval_batch_size` examples per batch, `batch_tokens` (None: the device's default) padded
    positions per forward pass, halved (logged) while a pass runs out of device memory, down to one
    example under one setting (then PassOutOfMemory); progress(examples done, examples, seconds)."""
    spec = inspect_model(tuned_source)
    tokenizer = AutoTokenizer.from_pretrained(spec.resolved_path)
    validation = read_task_split(data_root, f"glue_{task}", tokenizer, max_len, overlong).data
    if max_examples:
        validation = TaskData(
            *(
                field[:max_examples]
                for field in (validation.example_ids, validation.token_ids, validation.segments, validation.labels)
            )
        )
    model = use_ablation_attention(load_classifier(spec.resolved_path, compute))
    settings = ablation_settings(spec.n_layers, spec.n_heads)
    start = time.perf_counter()
    logits = validation_logits(
        model,
        validation,
        settings.disabled,
        pad_token_id=tokenizer.pad_token_id,
        with_token_types=spec.takes_token_types,
        eval_batch_size=eval_batch_size,
        batch_tokens=batch_tokens or compute.batch_tokens(),
        what=f"{task} head ablation",
        progress=progress,
    )
    seconds = time.perf_counter() - start
    scores = [glue_metrics(task, setting_logits, validation.labels) for setting_logits in logits]
    rows = _ablation_rows(settings, scores).with_columns(
        task=pl.lit(task), tuned_model_id=pl.lit(tuned_model_id), n_examples=pl.lit(len(validation))
    )
    gains = (
        rows.filter(pl.col("kind") != "baseline")
        .with_columns(delta=pl.col("score") - pl.col("baseline_score"))
        .sort("delta", descending=True)
        .select("kind", "layer", "head", "metric", "score", "delta")
    )
    return AblationScores(rows, gains, scores[0], spec.n_layers, spec.n_heads, len(scores), len(validation), seconds)


def _ablation_rows(settings: AblationSettings, scores: list[dict[str, float]]) -> pl.DataFrame:
    """One row per setting and metric, with the baseline's (setting 0's) score beside it."""
    kinds = ["baseline"] + ["head" if head else "layer" for head in settings.head[1:]]
    return pl.DataFrame(
        [
            {
                "kind": kind,
                "layer": layer,
                "head": head,
                "metric": metric,
                "score": score,
                "baseline_score": scores[0][metric],
            }
            for kind, layer, head, setting_scores in zip(kinds, settings.layer, settings.head, scores)
            for metric, score in setting_scores.items()
        ],
        schema_overrides={"layer": pl.Int16, "head": pl.Int16},
    )
