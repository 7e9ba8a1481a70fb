"""Gradient importance of attention (Clark et al. §3.2, Fig. 3): the magnitude of the
gradient of a model's own loss with respect to each attention weight, summed per
(example, layer, head) over the (query, key) pairs whose key is [SEP], '.'/',' or another token.

The loss is the model's training objective where its checkpoint carries the head:
masked-LM cross-entropy (BERT pre-training masking) or, for a fine-tuned classifier, the
cross-entropy (MSE for one-output regression) against the corpus's labels. Each example's
loss is its own mean, and the batch loss is their sum, so an example's gradients do not
depend on which other examples share its batch (padding is masked out of attention).
Gradients are taken in float32 on the device the model is loaded to.
"""

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import polars as pl
import torch
from transformers import (
    AutoConfig,
    AutoModelForMaskedLM,
    AutoModelForSequenceClassification,
    AutoTokenizer,
    PreTrainedModel,
)

from dagster_project.compute.backoff import BackOff
from dagster_project.compute.batching import BUILT_ON, Batch, frame, length_batches
from dagster_project.compute.devices import CPU, ComputeDevice
from dagster_project.compute.metrics import TokenMasks
from dagster_project.compute.models import inspect_model
from dagster_project.settings import models_cache_dir

TARGET_TYPES = ("sep", "punct", "other")  # Clark Fig. 3; "other" includes [CLS]
TARGET_TYPE = pl.Enum(TARGET_TYPES)
MASKED_LM, CLASSIFICATION, REGRESSION = "masked_lm", "sequence_classification", "sequence_regression"
MASK_PROBABILITY = 0.15
IGNORE_LABEL = -100  # cross_entropy's ignore_index: positions that are not predicted
_NOT_MASKABLE = ("cls", "sep", "special")
_MLM_ARCHITECTURES = ("ForMaskedLM", "ForPreTraining")


@dataclass(frozen=True)
class LossModel:
    """A model with the head of its training loss, eval mode, eager attention, fp32, on `compute`'s device."""

    model: PreTrainedModel
    loss_name: str  # masked_lm | sequence_classification | sequence_regression
    takes_token_types: bool
    pad_token_id: int
    mask_token_id: int | None  # masked_lm only
    compute: ComputeDevice = CPU  # always float32


@dataclass(frozen=True)
class NoLossHead:
    """Why a model has no loss to take gradients of (not an error: the model gets no rows)."""

    reason: str


@dataclass(frozen=True)
class GradImportance:
    rows: pl.DataFrame  # example_id, layer, head, target_type, grad_sum, weight_count
    n_examples: int
    seconds: float


@dataclass(frozen=True)
class GradImportanceTable:
    """The grad_importance rows of one (model, corpus) and what they came from."""

    rows: pl.DataFrame  # the pass's rows with loss_name, mask_probability and seed
    loss_name: str  # "none" when there are no rows
    outcome: GradImportance | NoLossHead  # the pass, or why there was none


def loss_name_for(architectures: list[str] | None, num_labels: int) -> str | None:
    """The training loss a checkpoint's config.architectures promises, or None."""
    names = architectures or []
    if any(name.endswith(_MLM_ARCHITECTURES) for name in names):
        return MASKED_LM
    if any(name.endswith("ForSequenceClassification") for name in names):
        return REGRESSION if num_labels == 1 else CLASSIFICATION
    return None


def classifies(resolved_path: str) -> bool:
    """Whether the model's config names a single-label sequence classifier, the head whose predictions the
    weighting faithfulness explains (config only, no weights loaded)."""
    config = AutoConfig.from_pretrained(resolved_path, cache_dir=models_cache_dir())
    return (
        loss_name_for(config.architectures, config.num_labels) == CLASSIFICATION
        and config.problem_type != "multi_label_classification"
    )


def load_loss_model(source: str, device: torch.device = CPU.device) -> LossModel | NoLossHead:
    """Load `source` with the head of its training loss, in float32 onto `device`; NoLossHead when it has none."""
    spec = inspect_model(source)
    config = AutoConfig.from_pretrained(spec.resolved_path, cache_dir=models_cache_dir())
    loss_name = loss_name_for(config.architectures, config.num_labels)
    if loss_name is None:
        return NoLossHead(
            f"Model '{source}' has no loss head to take gradients of: config.architectures is "
            f"{config.architectures}, not *ForMaskedLM / *ForPreTraining / *ForSequenceClassification "
            "(e.g. a sentence-transformers encoder saved as a bare BertModel)."
        )
    if loss_name != MASKED_LM and config.problem_type == "multi_label_classification":
        return NoLossHead(
            f"Model '{source}' is a multi-label classifier; only single-label and regression heads are supported."
        )
    auto_class = AutoModelForMaskedLM if loss_name == MASKED_LM else AutoModelForSequenceClassification
    model, loading = auto_class.from_pretrained(
        spec.resolved_path,
        cache_dir=models_cache_dir(),
        attn_implementation="eager",
        dtype=torch.float32,
        output_loading_info=True,
    )
    if loading["missing_keys"]:
        # E.g. ELECTRA's discriminator is *ForPreTraining but has no masked-LM head.
        return NoLossHead(
            f"Model '{source}' lists {config.architectures}, but its {auto_class.__name__} weights do not load "
            f"(missing: {sorted(loading['missing_keys'])[:4]}); a randomly initialized head is no training loss."
        )
    tokenizer = AutoTokenizer.from_pretrained(spec.resolved_path, cache_dir=models_cache_dir())
    if loss_name == MASKED_LM and tokenizer.mask_token_id is None:
        return NoLossHead(f"Model '{source}' has a masked-LM head but its tokenizer defines no mask token.")
    return LossModel(
        model=model.to(device).eval(),
        loss_name=loss_name,
        takes_token_types=spec.takes_token_types,
        pad_token_id=tokenizer.pad_token_id or 0,
        mask_token_id=tokenizer.mask_token_id,
        compute=ComputeDevice(device),
    )


def mask_tokens(
    tokens: pl.DataFrame, mask_token_id: int, vocab_size: int, seed: int, probability: float = MASK_PROBABILITY
) -> pl.DataFrame:
    """BERT pre-training masking of a `tokens` frame, seeded and independent of batching.

    Per example, max(1, round(probability x its maskable tokens)) positions are predicted
    (maskable: not [CLS]/[SEP]/other special tokens; '.' and ',' are maskable, as in BERT);
    of those, 80% become the mask token, 10% a random vocabulary id, 10% stay. Adds
    `label` (the original id at predicted positions, IGNORE_LABEL elsewhere); a position
    whose input id changed gets token_class 'other', since the model no longer sees its token.
    """
    rng = np.random.default_rng(seed)
    ordered = tokens.sort("example_id", "position")
    n = ordered.height
    maskable = ~pl.col("token_class").is_in(_NOT_MASKABLE)
    draws = ordered.with_columns(
        order=pl.Series(rng.random(n)),
        action=pl.Series(rng.random(n)),
        random_id=pl.Series(rng.integers(0, vocab_size, n)),
    )
    chosen = draws.with_columns(
        rank=pl.when(maskable).then(pl.col("order")).rank("ordinal").over("example_id"),
        n_predict=(maskable.sum() * probability + 0.5).floor().clip(lower_bound=1).over("example_id"),
    ).with_columns(predicted=(pl.col("rank") <= pl.col("n_predict")).fill_null(False))
    corrupted = (
        pl.when(pl.col("predicted") & (pl.col("action") < 0.8))
        .then(pl.lit(mask_token_id, dtype=pl.Int64))
        .when(pl.col("predicted") & (pl.col("action") < 0.9))
        .then(pl.col("random_id"))
        .otherwise(pl.col("token_id"))
    )
    return chosen.with_columns(
        label=pl.when(pl.col("predicted")).then(pl.col("token_id")).otherwise(IGNORE_LABEL),
        token_id=corrupted,
        token_class=pl.when(corrupted != pl.col("token_id")).then(pl.lit("other")).otherwise(pl.col("token_class")),
    ).select(*tokens.columns, "label")


def example_losses(logits: torch.Tensor, targets: torch.Tensor, loss_name: str) -> torch.Tensor:
    """(B,) loss of each example: mean cross-entropy over its predicted positions (masked LM,
    logits (B, T, V), targets (B, T)), cross-entropy of its class, or squared error."""
    if loss_name == MASKED_LM:
        per_token = torch.nn.functional.cross_entropy(
            logits.transpose(1, 2), targets, ignore_index=IGNORE_LABEL, reduction="none"
        )
        return per_token.sum(-1) / (targets != IGNORE_LABEL).sum(-1).clamp(min=1)
    if loss_name == CLASSIFICATION:
        return torch.nn.functional.cross_entropy(logits, targets, reduction="none")
    return torch.nn.functional.mse_loss(logits[:, 0], targets.to(logits.dtype), reduction="none")


def attention_gradients(
    model: PreTrainedModel, inputs: dict[str, torch.Tensor], targets: torch.Tensor, loss_name: str
) -> torch.Tensor:
    """(B, L, H, T, T) gradient of the summed example losses w.r.t. every attention weight.

    In eval mode the returned attention probabilities are the tensors multiplied with the
    values, so they are in the graph; autograd.grad w.r.t. them skips the parameter gradients
    that loss.backward() would also compute.
    """
    output = model(**inputs, output_attentions=True)
    loss = example_losses(output.logits, targets, loss_name).sum()
    return torch.stack(torch.autograd.grad(loss, output.attentions), dim=1)


def target_masks(masks: TokenMasks) -> torch.Tensor:
    """(B, T, C) key-type indicator for TARGET_TYPES; padding is no type."""
    other = masks.valid & ~masks.sep & ~masks.punct
    return torch.stack([masks.sep & masks.valid, masks.punct & masks.valid, other], dim=-1)


def grad_sums(gradients: torch.Tensor, masks: TokenMasks) -> tuple[torch.Tensor, torch.Tensor]:
    """Sum of |gradient| over valid query rows and keys of each target type: (B, L, H, C),
    and how many weights each sum covers: (B, C), the same for every layer and head."""
    key_types = target_masks(masks).to(gradients.dtype)
    rows = masks.valid.to(gradients.dtype)
    sums = torch.einsum("blhqk,bq,bkc->blhc", gradients.abs(), rows, key_types)
    counts = rows.sum(-1)[:, None] * key_types.sum(1)
    return sums, counts


def grad_columns(sums: torch.Tensor, counts: torch.Tensor, example_ids: torch.Tensor) -> dict[str, np.ndarray]:
    """Flat (example, layer, head, target type) rows; types an example lacks are no rows."""
    b, layer, head, kind = (counts[:, None, None, :] > 0).expand_as(sums).nonzero(as_tuple=True)
    columns = {
        "example_id": example_ids[b].to(torch.int32),
        "layer": (layer + 1).to(torch.int16),
        "head": (head + 1).to(torch.int16),
        "target_code": kind.to(torch.int8),
        "grad_sum": sums[b, layer, head, kind].cpu().to(torch.float64),  # on the CPU: MPS has no float64
        "weight_count": counts[b, kind].to(torch.int32),
    }
    return {name: value.cpu().numpy() for name, value in columns.items()}


def _padded_targets(batch: Batch, per_example: dict[int, torch.Tensor]) -> torch.Tensor:
    rows = [per_example[int(example_id)] for example_id in batch.example_ids]
    if rows[0].dim() == 0:
        return torch.stack(rows)
    return torch.nn.utils.rnn.pad_sequence(rows, batch_first=True, padding_value=IGNORE_LABEL)


def _batches_with_targets(
    loss_model: LossModel, tokens: pl.DataFrame, labels: pl.DataFrame | None, seed: int, batch_tokens: int
) -> Iterator[tuple[Batch, torch.Tensor]]:
    if loss_model.loss_name == MASKED_LM:
        tokens = mask_tokens(tokens, loss_model.mask_token_id, loss_model.model.config.vocab_size, seed)
        per_token = tokens.sort("example_id", "position").group_by("example_id", maintain_order=True).agg("label")
        targets = {eid: torch.tensor(values, device=BUILT_ON) for eid, values in per_token.iter_rows()}
    else:
        dtype = torch.int64 if loss_model.loss_name == CLASSIFICATION else torch.float32
        targets = {
            eid: torch.tensor(value, dtype=dtype, device=BUILT_ON)
            for eid, value in labels.select("example_id", "label").iter_rows()
        }
        tokens = tokens.filter(pl.col("example_id").is_in(labels["example_id"].implode()))
    for batch in length_batches(tokens, loss_model.pad_token_id, batch_tokens, loss_model.takes_token_types):
        yield batch, _padded_targets(batch, targets)


def check_labels(labels: pl.DataFrame, loss_name: str, num_labels: int, corpus: str) -> pl.DataFrame:
    """The labelled examples of a corpus, with labels the classifier can take; clear error otherwise."""
    labelled = labels.filter(pl.col("label").is_not_null() & pl.col("label").is_not_nan())
    if loss_name == CLASSIFICATION:
        bad = labelled.filter(
            (pl.col("label") != pl.col("label").round()) | (pl.col("label") < 0) | (pl.col("label") >= num_labels)
        )
        if not bad.is_empty():
            raise ValueError(
                f"Corpus '{corpus}' has labels the classifier cannot take "
                f"(it has {num_labels} classes, ids 0..{num_labels - 1}): "
                f"e.g. example {bad['example_id'][0]} has label {bad['label'][0]}. "
                "Pick a corpus of the task the model was fine-tuned on."
            )
        return labelled.with_columns(pl.col("label").cast(pl.Int64))
    return labelled


def needs_labels(loss_model: LossModel | NoLossHead) -> bool:
    """Whether the model's loss takes the corpus's labels (a sequence-classification head's)."""
    return isinstance(loss_model, LossModel) and loss_model.loss_name != MASKED_LM


def extract_grad_importance(
    loss_model: LossModel,
    tokens: pl.DataFrame,
    seed: int,
    labels: pl.DataFrame | None = None,
    batch_tokens: int | None = None,
    progress: Callable[[int, int, float], None] | None = None,
) -> GradImportance:
    """Per (example, layer, head, target type) the summed |d loss / d attention| and its weight count.

    `tokens` has the columns of the warehouse `tokens` table; `labels` (example_id, label)
    is needed for the sequence-classification losses and restricts the examples to those
    it lists. `seed` draws the masked-LM masking (unused by the other losses). `batch_tokens`
    defaults to the backward budget of the model's device; a pass that runs out of device memory
    starts again at half of it (logged), down to the longest example (then PassOutOfMemory). An
    example's gradients do not depend on its batch, so the rows are those of a run at the smaller budget.
    """
    if loss_model.loss_name != MASKED_LM and labels is None:
        raise ValueError(
            f"The {loss_model.loss_name} loss needs the examples' labels: pass `labels` (example_id, label)."
        )
    started = time.perf_counter()
    backoff = BackOff(
        "Gradient importance",
        "padded positions per batch (batch_tokens)",
        "Lower the corpus's max_len (run config of its corpus asset) or run on a device with more memory "
        "(ATTN_DEVICE). Nothing was written.",
        loss_model.compute.device,
        smallest=int(tokens.group_by("example_id").len()["len"].max() or 1),
    )
    budget = batch_tokens or loss_model.compute.batch_tokens(backward=True)
    parts, done = backoff.retrying(
        lambda budget: _grad_parts(loss_model, tokens, seed, labels, budget, progress), budget
    )
    rows = (
        frame(parts)
        .with_columns(
            target_type=pl.col("target_code").replace_strict(dict(enumerate(TARGET_TYPES)), return_dtype=TARGET_TYPE)
        )
        .drop("target_code")
        if parts
        else empty_rows()
    )
    return GradImportance(rows=rows, n_examples=done, seconds=time.perf_counter() - started)


def _grad_parts(
    loss_model: LossModel,
    tokens: pl.DataFrame,
    seed: int,
    labels: pl.DataFrame | None,
    batch_tokens: int,
    progress: Callable[[int, int, float], None] | None,
) -> tuple[list[dict[str, np.ndarray]], int]:
    """One pass at `batch_tokens`: each batch's grad_columns, and the examples done."""
    started = time.perf_counter()
    total = tokens["example_id"].n_unique() if labels is None else labels.height
    parts: list[dict[str, np.ndarray]] = []
    done = 0
    device = loss_model.compute.device
    for batch, targets in _batches_with_targets(loss_model, tokens, labels, seed, batch_tokens):
        batch = batch.to(device)
        gradients = attention_gradients(loss_model.model, batch.inputs, targets.to(device), loss_model.loss_name)
        parts.append(grad_columns(*grad_sums(gradients.detach(), batch.masks), batch.example_ids))
        done += len(batch.example_ids)
        if progress:
            progress(done, total, time.perf_counter() - started)
    return parts, done


def empty_rows() -> pl.DataFrame:
    """The grad_importance columns with no rows (a model without a loss head)."""
    return pl.DataFrame(
        schema={
            "example_id": pl.Int32,
            "layer": pl.Int16,
            "head": pl.Int16,
            "grad_sum": pl.Float64,
            "weight_count": pl.Int32,
            "target_type": TARGET_TYPE,
        }
    )


def grad_importance_table(
    source: str,
    loss_model: LossModel | NoLossHead,
    tokens: pl.DataFrame,
    examples: pl.DataFrame | None,
    corpus: str,
    seed: int,
    batch_tokens: int | None,
    progress: Callable[[str], Callable[[int, int, float], None]],
) -> GradImportanceTable:
    """The grad_importance rows of model `source` on `tokens` (extract_grad_importance), with the
    loss, masking and seed they were taken with; no rows, and why, for a model without a loss
    head or a classifier whose corpus has no labels.

    `examples` (example_id, label) are the corpus's labels where the loss needs them
    (needs_labels), else None; `progress` gives the pass's callback for its label.
    """
    reason = loss_model.reason if isinstance(loss_model, NoLossHead) else None
    labels = None
    if needs_labels(loss_model):
        examples = examples.filter(pl.col("example_id").is_in(tokens["example_id"].unique().implode()))
        labels = check_labels(examples, loss_model.loss_name, loss_model.model.config.num_labels, corpus)
        if labels.is_empty():
            reason = (
                f"Model '{source}' has a {loss_model.loss_name} head, but corpus '{corpus}' has no labels: "
                "set the run config's corpus to the labelled corpus of its task (e.g. glue_sst2)."
            )
    if reason:
        outcome, rows, loss_name = NoLossHead(reason), empty_rows(), "none"
    else:
        report = progress(f"{corpus} gradient importance ({loss_model.loss_name})")
        outcome = extract_grad_importance(loss_model, tokens, seed, labels, batch_tokens, report)
        rows, loss_name = outcome.rows, loss_model.loss_name
    rows = rows.with_columns(
        loss_name=pl.lit(loss_name),
        mask_probability=pl.lit(MASK_PROBABILITY if loss_name == MASKED_LM else None, dtype=pl.Float32),
        seed=pl.lit(seed, dtype=pl.Int32),
    )
    return GradImportanceTable(rows, loss_name, outcome)
