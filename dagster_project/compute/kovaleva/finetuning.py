"""Fine-tuning an encoder on a GLUE task and scoring it as GLUE does (Kovaleva §4.3, Table 1).

Three settings, as in Table 1:
- `pretrained`: the pre-trained encoder with a fresh (seeded, untrained) classification head
  and no fine-tuning. Table 1's "Pre-trained" column is that: chance-level or
  majority/minority-class scores (MRPC F1 0 / accuracy 31.6 = always "not equivalent").
- `random_init_finetuned`: same architecture, every weight drawn from the config's normal
  initializer, then fine-tuned with the recipe.
- `pretrained_finetuned`: the pre-trained encoder fine-tuned with the recipe.
The recipe defaults to the paper's (Devlin et al.: batch 32, 3 epochs; lr 2e-5 with 10%
linear warm-up and linear decay, AdamW, weight decay 0.01); `max_steps` and `train_subset`
shrink it to fit a CPU; `precision` runs the forward and loss under bfloat16 autocast (mixed
precision: float32 weights and AdamW) where the device has bfloat16 units. Scoring runs in float32.
Pairs longer than the paper's 128 pieces are truncated, as GLUE evaluation does, so Table 1 scores
the whole validation split (encode_task). score_settings runs the chosen settings for one base
model and task.
"""

import json
import logging
import math
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Literal, get_args

import numpy as np
import polars as pl
import torch
from transformers import (
    AutoConfig,
    AutoModelForSequenceClassification,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from dagster_project.compute.backoff import BackOff
from dagster_project.compute.devices import CPU, ComputeDevice, bfloat16_units
from dagster_project.compute.kovaleva.task_data import (
    TaskData,
    length_sorted_batches,
    pad_inputs,
    read_task_split,
    task_head,
)
from dagster_project.compute.kovaleva.training_state import (
    TrainingCheckpoints,
    generator_state,
    restore_generators,
    training_state_dir,
)
from dagster_project.compute.models import inspect_model
from dagster_project.settings import models_cache_dir

SETTINGS = ("pretrained", "random_init_finetuned", "pretrained_finetuned")
FINETUNED_ANALYSES = ("attention",)  # what a fine-tuned checkpoint is registered for (on its task's corpus)
# task_scores columns that are null in some settings (no training, no checkpoint), typed for every row
TASK_SCORE_TYPES = {
    "tuned_model_id": pl.String,
    "steps": pl.Int32,
    "train_examples": pl.Int32,
    "final_loss": pl.Float64,
}

LOG = logging.getLogger(__name__)

# auto: bfloat16 where the device has bfloat16 units (bfloat16_units), else float32
Precision = Literal["auto", "float32", "bfloat16"]
PRECISIONS: tuple[str, ...] = get_args(Precision)


@dataclass(frozen=True)
class Recipe:
    learning_rate: float = 2e-5
    batch_size: int = 32
    epochs: int = 3
    max_steps: int | None = None  # stop after this many optimizer steps
    train_subset: int | None = None  # train on this many examples (seeded sample)
    seed: int = 0
    warmup_ratio: float = 0.1
    weight_decay: float = 0.01
    # The forward and loss's precision (training_precision). float32 here, so a Recipe() trains the same on
    # every machine; the finetuned_<task> assets default to auto.
    precision: Precision = "float32"


@dataclass(frozen=True)
class TrainLog:
    losses: list[float]  # per optimizer step
    steps: int
    train_examples: int
    seconds: float  # of this session's steps (a resumed run's earlier steps not counted)
    micro_batch: int  # examples per forward and backward pass (gradients summed over a step's micro-batches)
    resumed_at: int = 0  # the step a saved training state was resumed after (0: started afresh)
    precision: str = "float32"  # what the forward and loss ran in: float32, or bfloat16 (autocast)


def build_classifier(path: str, task: str, init: str, seed: int, device: torch.device = CPU.device) -> PreTrainedModel:
    """A float32 sequence classifier on the encoder at `path`, on `device`: `pretrained` loads its
    weights, `random` draws every weight from the config's initializer. The head is seeded either
    way, on the CPU, so every device starts from the same weights."""
    return _initialized(path, task, init, seed).to(device)


def _initialized(path: str, task: str, init: str, seed: int) -> PreTrainedModel:
    num_labels, problem_type = task_head(task)
    options = {"num_labels": num_labels, "problem_type": problem_type}
    torch.manual_seed(seed)
    if init == "pretrained":
        return AutoModelForSequenceClassification.from_pretrained(
            path, attn_implementation="eager", dtype=torch.float32, **options
        )
    if init == "random":
        config = AutoConfig.from_pretrained(path, **options)
        return AutoModelForSequenceClassification.from_config(config, attn_implementation="eager", dtype=torch.float32)
    raise ValueError(f"init must be 'pretrained' or 'random', not {init!r}")


def load_classifier(path: str, compute: ComputeDevice = CPU) -> PreTrainedModel:
    """A saved fine-tuned classifier (its trained head included), eager attention, eval mode, in
    `compute`'s dtype on its device (forward-only uses: predictions, ablation)."""
    return (
        AutoModelForSequenceClassification.from_pretrained(path, attn_implementation="eager", dtype=compute.dtype)
        .to(compute.device)
        .eval()
    )


def training_precision(requested: str, device: torch.device) -> str:
    """The precision fine-tuning's forward and loss run in on `device`: `float32` or `bfloat16` as asked,
    `auto` bfloat16 where the device has bfloat16 units (bfloat16_units), else float32."""
    if requested not in PRECISIONS:
        raise ValueError(f"precision must be one of {list(PRECISIONS)}, got {requested!r}")
    if requested != "auto":
        return requested
    return "bfloat16" if bfloat16_units(device) else "float32"


def _on_device(model: PreTrainedModel, inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {name: value.to(model.device) for name, value in inputs.items()}


def no_decay_parameters(model: PreTrainedModel) -> set[str]:
    """Names of the parameters Devlin et al.'s recipe exempts from weight decay: every bias and every
    layer-norm weight, found by module type (DistilBERT's `sa_layer_norm`, ALBERT's
    `full_layer_layer_norm` and BERT's `LayerNorm` alike)."""
    norms = {
        f"{module_name}.{name}".lstrip(".")
        for module_name, module in model.named_modules()
        if isinstance(module, torch.nn.LayerNorm)
        for name, _ in module.named_parameters(recurse=False)
    }
    return norms | {name for name, _ in model.named_parameters() if name.endswith("bias")}


def fine_tune(
    model: PreTrainedModel,
    data: TaskData,
    recipe: Recipe,
    pad_token_id: int,
    with_token_types: bool,
    progress: Callable[[int, int, float, float], None] | None = None,
    micro_batch: int | None = None,
    checkpoints: TrainingCheckpoints | None = None,
) -> TrainLog:
    """AdamW with linear warm-up and decay over shuffled batches on the model's device;
    progress(step, steps, loss, seconds). The order of examples is drawn on the CPU (the same on
    every device); dropout masks come from the device's generator.

    A step's batch goes through the model `micro_batch` examples at a time (None: all at once), its
    gradients summed, weighted to the batch mean; a step that runs out of device memory is taken again
    (generators rewound) at half the micro-batch, logged, down to one example (then PassOutOfMemory).
    With `checkpoints`, the training state is saved every `checkpoints.every` steps and after the last,
    and training resumes from a saved state of the same recipe and data (after the last step: nothing
    left to train). The caller removes the state once it no longer needs it.

    Mixed precision (`recipe.precision`, training_precision): the weights, gradients and AdamW stay in
    float32; in bfloat16 the forward and loss run under autocast, the backward outside it.
    """
    if model.dtype != torch.float32:
        raise ValueError(
            f"fine-tuning takes gradients and runs in float32; the model is in {model.dtype}: build it with "
            "build_classifier (float32) and keep low-precision dtypes for forward-only passes."
        )
    if len(data) == 0:
        raise ValueError("no training examples: materialize the task's train corpus (glue_<task>_train_examples) first")
    plan = step_batches(len(data), recipe)
    steps = len(plan)
    warmup = int(recipe.warmup_ratio * steps)
    exempt = no_decay_parameters(model)
    no_decay = [p for name, p in model.named_parameters() if name in exempt]
    decay = [p for name, p in model.named_parameters() if name not in exempt]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": recipe.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=recipe.learning_rate,
    )
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda step: (step + 1) / (warmup + 1) if step < warmup else max(0.0, (steps - step) / max(1, steps - warmup)),
    )
    torch.manual_seed(recipe.seed)  # dropout masks
    precision = training_precision(recipe.precision, model.device)
    # The precision the run takes, not the one asked for: a state saved in float32 resumes under `auto` on a
    # device without bfloat16 units, and one saved in bfloat16 is not resumed in float32 (nor the reverse).
    identity = {
        "recipe": asdict(replace(recipe, precision=precision)),
        "train_examples": len(data),
        "model": type(model).__name__,
    }
    losses: list[float] = []
    micro = micro_batch or recipe.batch_size
    if checkpoints is not None and (state := checkpoints.saved(identity)) is not None:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        schedule.load_state_dict(state["schedule"])
        restore_generators(model.device, state["generators"])
        losses, micro = state["losses"], min(micro, state["micro_batch"])
        LOG.info(f"fine-tuning resumed after step {len(losses)}/{steps} from {checkpoints.path}")
    resumed_at = len(losses)
    backoff = BackOff(
        "Fine-tuning",
        "examples per micro-batch",
        "Lower max_len (run config of the finetuned asset) or run on a device with more memory (ATTN_DEVICE). "
        "Nothing was written.",
        model.device,
    )
    model.train()
    start = time.perf_counter()
    for batch in plan[resumed_at:]:
        generators = generator_state(model.device)
        while True:
            try:
                loss = _step_loss(model, data, batch, micro, pad_token_id, with_token_types, precision)
                break
            except torch.OutOfMemoryError as error:
                reason = str(error)  # the traceback, which holds the step's tensors, stays in the except clause
            optimizer.zero_grad()
            restore_generators(model.device, generators)
            micro = backoff.halved(micro, reason)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
        losses.append(loss)
        if checkpoints is not None and (len(losses) % checkpoints.every == 0 or len(losses) == steps):
            checkpoints.save(identity, model, optimizer, schedule, losses, micro)
        if progress is not None:
            progress(len(losses), steps, losses[-1], time.perf_counter() - start)
    model.eval()
    train_examples = min(recipe.train_subset or len(data), len(data))
    return TrainLog(losses, steps, train_examples, time.perf_counter() - start, micro, resumed_at, precision)


def step_batches(n_examples: int, recipe: Recipe) -> list[list[int]]:
    """The recipe's optimizer steps: a seeded subset of the examples (train_subset), shuffled again each
    epoch and cut into batches, up to max_steps. Drawn from the seed alone, so a resumed run takes the
    steps it had left without a saved generator."""
    # Index planning on the CPU, whatever the model's device: the order is the same on every device.
    generator = torch.Generator().manual_seed(recipe.seed)
    indices = torch.randperm(n_examples, generator=generator, device="cpu")[: recipe.train_subset or n_examples]
    steps = min(recipe.epochs * math.ceil(len(indices) / recipe.batch_size), recipe.max_steps or math.inf)
    batches: list[list[int]] = []
    while len(batches) < steps:
        order = indices[torch.randperm(len(indices), generator=generator, device="cpu")].tolist()
        batches += [order[start : start + recipe.batch_size] for start in range(0, len(order), recipe.batch_size)]
    return batches[:steps]


def _step_loss(
    model: PreTrainedModel,
    data: TaskData,
    batch: list[int],
    micro: int,
    pad_token_id: int,
    with_token_types: bool,
    precision: str,
) -> float:
    """Forward and backward passes over a step's batch, `micro` examples at a time, each part's mean
    loss weighted by its share of the batch, so the summed gradients are those of the batch mean;
    returns that mean loss. The forward and loss run in `precision` (bfloat16: under autocast)."""
    regression = model.config.problem_type == "regression"
    total = 0.0
    for start in range(0, len(batch), micro):
        part = batch[start : start + micro]
        labels = data.labels[part] if regression else data.labels[part].long()
        inputs = _on_device(model, pad_inputs(data, part, pad_token_id, with_token_types))
        # Autocast runs the matrix products in bfloat16 and the losses (cross-entropy, MSE) in float32.
        # bfloat16 has float32's exponent range, so small gradients do not underflow as in float16: no loss scaling.
        with torch.autocast(model.device.type, dtype=torch.bfloat16, enabled=precision == "bfloat16"):
            loss = model(**inputs, labels=labels.to(model.device)).loss * (len(part) / len(batch))
        loss.backward()
        total += loss.item()
    return total


@torch.no_grad()
def predict_logits(
    model: PreTrainedModel, data: TaskData, pad_token_id: int, with_token_types: bool, batch_size: int = 64
) -> torch.Tensor:
    """Logits (N, C) in example order, float32 on the CPU (the forward on the model's device)."""
    model.eval()
    logits = torch.empty(len(data), model.config.num_labels, device=CPU.device)
    for batch in length_sorted_batches(data, batch_size):
        inputs = _on_device(model, pad_inputs(data, batch, pad_token_id, with_token_types))
        logits[batch] = model(**inputs).logits.float().cpu()
    return logits


def _validation_logits(
    model: PreTrainedModel, data: TaskData, pad_token_id: int, with_token_types: bool, batch_size: int
) -> torch.Tensor:
    """predict_logits, started again at half the batch (logged) while it runs out of device memory."""
    backoff = BackOff(
        "Fine-tuned model's validation scores",
        "examples per batch (eval_batch_size)",
        "Lower max_len (run config of the finetuned asset) or run on a device with more memory (ATTN_DEVICE). "
        "Nothing was written.",
        model.device,
    )
    return backoff.retrying(lambda size: predict_logits(model, data, pad_token_id, with_token_types, size), batch_size)


def glue_metrics(task: str, logits: torch.Tensor, labels: torch.Tensor) -> dict[str, float]:
    """GLUE's validation metrics: accuracy (+ F1 of the positive class for MRPC, Matthews for
    CoLA); Pearson and Spearman for STS-B. logits (N, C), labels (N,)."""
    # imported here so the compute layer runs where only torch, transformers and polars are installed
    from scipy.stats import pearsonr, spearmanr
    from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef

    gold = labels.numpy()
    if task_head(task)[1] == "regression":
        predicted = logits[:, 0].numpy()
        if np.ptp(predicted) == 0:  # a constant prediction has no correlation
            return {"pearson": float("nan"), "spearman": float("nan")}
        return {
            "pearson": float(pearsonr(predicted, gold).statistic),
            "spearman": float(spearmanr(predicted, gold).statistic),
        }
    predicted = logits.argmax(-1).numpy()
    gold = gold.astype(int)
    scores = {"accuracy": float(accuracy_score(gold, predicted))}
    if task == "mrpc":
        scores["f1"] = float(f1_score(gold, predicted, zero_division=0.0))
    if task == "cola":
        scores["matthews"] = float(matthews_corrcoef(gold, predicted))
    return scores


def save_checkpoint(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, folder: Path, recipe: dict) -> Path:
    """save_pretrained model + tokenizer, and recipe.json (how it was trained, what it scored)."""
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    (folder / "recipe.json").write_text(json.dumps(recipe, indent=2, sort_keys=True))
    return folder


def recipe_record(recipe: Recipe, base_source: str, task: str, log: TrainLog | None) -> dict:
    """The recipe as stored with a checkpoint and in `task_scores.recipe`."""
    record = {"base_model": base_source, "task": task, **asdict(recipe)}
    if log is not None:
        record |= {
            "steps": log.steps,
            "train_examples": log.train_examples,
            "first_loss": log.losses[0],
            "final_loss": log.losses[-1],
            "micro_batch": log.micro_batch,
            "precision": log.precision,
        }
    return record


def chosen_settings(requested: list[str]) -> list[str]:
    """The requested Table 1 settings in SETTINGS order; raises when none or an unknown one is asked for."""
    unknown = set(requested) - set(SETTINGS)
    if unknown or not requested:
        raise ValueError(f"settings must be a non-empty subset of {list(SETTINGS)}, got {requested}")
    return [name for name in SETTINGS if name in requested]


@dataclass(frozen=True)
class TaskScores:
    """Table 1 on one task: the scored settings' `task_scores` rows and what they were scored on."""

    rows: pl.DataFrame
    train_examples: int
    validation_examples: int
    validation_overlong: int  # validation pairs over max_len pieces (truncated or dropped)
    training_precision: str | None  # the fine-tuned settings' forward and loss precision; None: none trained


def score_settings(
    source: str,
    model_id: str,
    task: str,
    settings: list[str],
    recipe: Recipe,
    *,
    max_len: int,
    overlong: str,
    eval_batch_size: int,
    checkpoint_every: int,
    data_root: Path,
    compute: ComputeDevice,
    register: Callable[[Path], str],
    log: logging.Logger,
) -> TaskScores:
    """Kovaleva Table 1 on `task` for base model `source` (partition `model_id`): each setting built, fine-tuned
    unless `pretrained` (on glue_<task>_train under `data_root`) and scored on all of glue_<task>'s validation
    split. The pre-trained + fine-tuned one is saved with its recipe; `register(folder)` returns its partition key.
    Each fine-tuning saves its training state every `checkpoint_every` steps and after its last (0: never;
    training_state_dir) and resumes from it when run again after a kill; a finished setting is only scored
    again. The states are removed once every setting is scored."""
    spec = inspect_model(source)
    tokenizer = AutoTokenizer.from_pretrained(spec.resolved_path)
    train_split = read_task_split(data_root, f"glue_{task}_train", tokenizer, max_len, overlong)
    validation_split = read_task_split(data_root, f"glue_{task}", tokenizer, max_len, overlong)
    train, validation = train_split.data, validation_split.data
    log.info(
        f"{task}: {len(train)} train and {len(validation)} validation examples; over {max_len} pieces "
        f"({overlong}): {train_split.n_overlong} train, {validation_split.n_overlong} validation"
    )
    pad_id, token_types = tokenizer.pad_token_id, spec.takes_token_types
    if note := compute.float32_note("Fine-tuning"):
        log.warning(note)
    precision = None
    if set(settings) - {"pretrained"}:
        precision = training_precision(recipe.precision, compute.device)
        log.info(
            f"Fine-tuning: float32 weights and AdamW, forward and loss in {precision} (precision {recipe.precision})"
        )
    rows = []
    # Each setting's final training state stays until every setting is scored, so a task step killed
    # in a later setting does not train the finished ones again.
    states = {setting: training_state_dir() / f"{model_id}--{task}--{setting}" for setting in settings}
    for setting in settings:
        start = time.perf_counter()
        checkpoints = TrainingCheckpoints(states[setting], checkpoint_every) if checkpoint_every else None
        model, train_log = _trained_classifier(
            setting, spec.resolved_path, task, recipe, train, pad_id, token_types, compute.device, log, checkpoints
        )
        scores = glue_metrics(
            task, _validation_logits(model, validation, pad_id, token_types, eval_batch_size), validation.labels
        )
        record = recipe_record(recipe, source, task, train_log) | {
            "setting": setting,
            "validation": scores,
            "max_len": max_len,
            "overlong": overlong,
            "validation_overlong": validation_split.n_overlong,
        }
        tuned_model_id = None
        if setting == "pretrained_finetuned":
            # recipe.json is also the checkpoint's registry entry (defs/model_registry.py checkpoint_entry)
            entry = {"corpora": [f"glue_{task}"], "analyses": list(FINETUNED_ANALYSES)}
            folder = save_checkpoint(model, tokenizer, finetuned_checkpoint_dir(model_id, task), record | entry)
            tuned_model_id = register(folder)
            log.info(f"Saved {folder} and registered it as model partition '{tuned_model_id}'")
        seconds = time.perf_counter() - start
        log.info(f"{task} {setting}: {scores} ({seconds:.0f} s)")
        rows += _setting_rows(task, setting, scores, len(validation), tuned_model_id, train_log, record, seconds)
    for folder in states.values():
        shutil.rmtree(folder, ignore_errors=True)
    frame = pl.DataFrame(rows, schema_overrides=TASK_SCORE_TYPES)
    return TaskScores(frame, len(train), len(validation), validation_split.n_overlong, precision)


def finetuned_checkpoint_dir(model_id: str, task: str) -> Path:
    """Where the model partition `model_id` fine-tuned on `task` is saved (and registered from)."""
    return models_cache_dir() / "finetuned" / f"{model_id}--{task}"


def _trained_classifier(
    setting: str,
    path: str,
    task: str,
    recipe: Recipe,
    train: TaskData,
    pad_token_id: int,
    with_token_types: bool,
    device: torch.device,
    log: logging.Logger,
    checkpoints: TrainingCheckpoints | None,
) -> tuple[PreTrainedModel, TrainLog | None]:
    """A setting's classifier on `device`, fine-tuned on `train` (logging each step, saving its training
    state to `checkpoints`) unless `pretrained`."""
    init = "random" if setting == "random_init_finetuned" else "pretrained"
    model = build_classifier(path, task, init, recipe.seed, device)
    if setting == "pretrained":
        return model, None

    def report(step: int, steps: int, loss: float, seconds: float) -> None:
        log.info(f"{task} {setting}: step {step}/{steps}, loss {loss:.4f}, {seconds:.0f} s")

    return model, fine_tune(model, train, recipe, pad_token_id, with_token_types, report, checkpoints=checkpoints)


def _setting_rows(
    task: str,
    setting: str,
    scores: dict[str, float],
    n_examples: int,
    tuned_model_id: str | None,
    train_log: TrainLog | None,
    record: dict,
    seconds: float,
) -> list[dict]:
    """The `task_scores` rows of one setting, one per metric."""
    return [
        {
            "task": task,
            "setting": setting,
            "metric": metric,
            "score": score,
            "n_examples": n_examples,
            "tuned_model_id": tuned_model_id,
            "steps": train_log and train_log.steps,
            "train_examples": train_log and train_log.train_examples,
            "final_loss": train_log and train_log.losses[-1],
            "recipe": json.dumps(record, sort_keys=True),
            "seconds": seconds,
        }
        for metric, score in scores.items()
    ]
