"""Reproducing the three papers: what `attn-warehouse reproduce` runs, at which sizes, and how long
each step is expected to take.

Two profiles. `paper`: the assets' defaults, which are the papers' settings (docs/methods.md: every
corpus of §2 that is present, HTA on the 1800 XNLI examples, fine-tuning at Kovaleva's recipe).
`quick`: every result at reduced sizes, so a newcomer sees the whole report at once; the run config
below says what is reduced, and the report labels such results.

Estimates: each step family's seconds per unit (examples, training steps, ablation settings)
measured for MiniLM (6 x 12 x 384) on 2 quiet CPU cores by `attn-warehouse reproduce --quick`
(the console's step times, 2026-11-26: 16.8 minutes for 110 steps; exact HTA, the report and the
weighting faithfulness again on 2026-11-29: 22.3 minutes in all), scaled by the model's size
(layers x hidden^2, what a forward costs) and the unit count of the chosen profile. A corpus without
a size counts as 2000 examples; one whose cap is the model's d_head (XNLI) counts the examples that
fit it, tokenized by the model's tokenizer where the corpus is present (MiniLM keeps 1800 English pairs,
483 German and 36 Arabic ones under 32 pieces).
They are for a CPU; on another device they are an upper bound until that device's rates are measured
(bench/bench_device.py).
"""

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import polars as pl
import torch
from dagster import AssetKey, DagsterInstance
from transformers import PreTrainedTokenizerBase

from dagster_project.compute.checks import CHECK_MIN_EXAMPLES
from dagster_project.compute.kovaleva.finetuning import training_precision
from dagster_project.compute.pascual.hta_facts import DEFAULT_HTA_METHOD
from dagster_project.corpora import CORPORA, encode_corpus
from dagster_project.defs.staleness import latest_materialization
from dagster_project.settings import data_dir

PROFILES = ("quick", "paper")
MINILM_FORWARD = 6 * 384**2  # layers x hidden^2 of the model the rates were measured on
QUICK_EXAMPLES = 200  # examples per corpus in a quick reproduction
# HTA examples per language in a quick reproduction, taken by exact HTA outright. An estimator's check
# needs CHECK_MIN_EXAMPLES exact examples to judge it, and on MiniLM those alone (about 55 s each on 2
# cores) would take more than twice a quick run's 20 minutes; two exact examples per language fill every
# Pascual result, from few examples, at 1.5-2.5 minutes a language.
QUICK_HTA_EXAMPLES = 2
QUICK_FINETUNE_STEPS = 12
QUICK_TRAIN_EXAMPLES = 384
QUICK_ABLATION_EXAMPLES = 32
QUICK_PROBE_SENTENCES = 300
# Fine-tuning's seconds per training step (every Table 1 setting's steps and evaluation): 3.0 in float32;
# the finetuned assets' precision `auto` trains under bfloat16 autocast where the CPU has bfloat16 units,
# measured at 0.55x float32's time per step on MiniLM and SST-2 with the same dev accuracy (docs/methods.md)
FINETUNE_SECONDS_PER_STEP = 3.0 * (0.55 if training_precision("auto", torch.device("cpu")) == "bfloat16" else 1.0)
_CORPUS = "(" + "|".join(sorted(map(re.escape, CORPORA), key=len, reverse=True)) + ")"  # any corpus name
# the corpora a quick reproduction samples (the others are small: FrameNet's 47 sentences, OntoGUM's documents)
_SAMPLED = r"(wiki_segments|xnli_[a-z]+|ud_[a-z]+_(dev|test)|gap_[a-z]+|glue_[a-z0-9]+)"


@dataclass(frozen=True)
class StepRule:
    """Run config and cost of the assets whose names match `assets` (a regular expression)."""

    assets: str
    quick_config: dict[str, Any]  # run config of the quick profile (paper: the assets' defaults)
    unit: str  # what the cost counts
    seconds_per_unit: float  # MiniLM, 2 CPU cores
    fixed_seconds: float
    units: "Units"
    checked: "CheckedEstimate | None" = None  # a step computed by an estimator checked against its exact method


@dataclass(frozen=True)
class CheckedEstimate:
    """A step whose estimator is first checked against its exact method on some of its units (both
    computed there), then computes the rest by the estimator, or by the exact method where the check
    missed (the check's exact units not again)."""

    exact_seconds_per_unit: float  # MiniLM, 2 CPU cores
    check_units: Callable[[dict], int]  # the run config -> units the check computes exactly
    method: Callable[[dict], str]  # the run config -> the step's method ("exact": run outright, no check)


@dataclass(frozen=True)
class ModelShape:
    n_layers: int
    hidden: int
    n_heads: int
    # corpus -> its examples that fit the model's max_len (examples_that_fit); a corpus not in it counts at its size
    fitting_examples: Mapping[str, int] = field(default_factory=dict, hash=False)

    @property
    def scale(self) -> float:
        return self.n_layers * self.hidden**2 / MINILM_FORWARD


# (asset name, profile, model, the asset's run config: the profile's with the user's values over it) -> units
Units = Callable[[str, str, ModelShape, dict], int]


def _corpus(asset: str, suffix: str) -> str:
    return asset.removesuffix(suffix)


def _corpus_examples(corpus: str, profile: str, model: ModelShape) -> int:
    spec = CORPORA[corpus]
    size = spec.size or 2000  # corpora without a size are read whole; 2000 is their order of magnitude
    size = min(size, model.fitting_examples.get(corpus, size))
    return min(size, QUICK_EXAMPLES) if profile == "quick" else size


def examples_that_fit(tokenizer: PreTrainedTokenizerBase, d_head: int) -> dict[str, int]:
    """Per corpus whose cap is the model's d_head (XNLI) and whose files are present, how many of its
    examples the corpus asset keeps for a model with this tokenizer: the plan's count, where the
    corpus's nominal size would overstate a model with short heads (MiniLM keeps 36 of XNLI's Arabic pairs)."""
    counts = {}
    for name, spec in CORPORA.items():
        if not spec.max_len_is_d_head or spec.missing_files(data_dir()):
            continue
        encoded = encode_corpus(spec.read(data_dir()), tokenizer, spec.default_max_len(d_head), spec.size, spec.seed)
        counts[name] = encoded.examples.height
    return counts


def _limited(config: dict, key: str, count: int) -> int:
    """`count`, or the run config's `key` where it sets a smaller one."""
    return min(count, config[key]) if config.get(key) else count


def _examples_of(suffix: str, limit: str = "max_examples") -> Units:
    return lambda asset, profile, model, config: _limited(
        config, limit, _corpus_examples(_corpus(asset, suffix), profile, model)
    )


_corpus_size = _examples_of("_examples", "size")


def _finetune_steps(asset: str, profile: str, model: ModelShape, config: dict) -> int:
    training = _limited(config, "train_subset", _training_examples(asset.removeprefix("finetuned_")))
    return _limited(config, "max_steps", 3 * math.ceil(training / 32))  # Kovaleva: 3 epochs, batch 32


def _training_examples(task: str) -> int:
    """Rows of the task's training Parquet file (its footer, not the data), else 8000."""
    train = CORPORA.get(f"glue_{task}_train")
    entries = [entry if isinstance(entry, tuple) else (entry,) for entry in (train.files if train else ())]
    parquet = [data_dir() / name for entry in entries for name in entry if name.endswith(".parquet")]
    present = [path for path in parquet if path.exists()]
    return sum(pl.scan_parquet(path).select(pl.len()).collect().item() for path in present) or 8000


def _ablation_settings(asset: str, profile: str, model: ModelShape, config: dict) -> int:
    settings = 1 + model.n_layers * model.n_heads + model.n_layers  # none, each head, each layer (ablation.py)
    task = _corpus(asset, "_ablation")
    return settings * _limited(config, "max_examples", _corpus_examples(f"glue_{task}", profile, model))


def _gradient_examples(asset: str, profile: str, model: ModelShape, config: dict) -> int:
    return _limited(config, "max_examples", _corpus_examples("wiki_segments", profile, model))


def _probe_sentences(asset: str, profile: str, model: ModelShape, config: dict) -> int:
    return _limited(config, "max_sentences", 2000)


def _faithfulness_examples(asset: str, profile: str, model: ModelShape, config: dict) -> int:
    return _limited(config, "max_examples", _corpus_examples(config.get("corpus", "glue_sst2"), profile, model))


def _one(asset: str, profile: str, model: ModelShape, config: dict) -> int:
    return 1


RULES = (
    StepRule(
        _SAMPLED + "_examples", {"size": QUICK_EXAMPLES}, "examples", 0.01, 2.0, _examples_of("_examples", "size")
    ),
    StepRule(_CORPUS + "_examples", {}, "examples", 0.01, 2.0, _examples_of("_examples", "size")),
    StepRule(r"wiki_segments_attention_facts", {}, "examples", 0.075, 1.0, _examples_of("_attention_facts")),
    StepRule(_CORPUS + "_attention_facts", {}, "examples", 0.012, 1.0, _examples_of("_attention_facts")),
    StepRule(
        _CORPUS + "_hta_facts",
        {"max_examples": QUICK_HTA_EXAMPLES, "hta_method": "exact"},
        "examples",
        2.6,  # the default estimator, <= d_head pieces
        5.0,
        _examples_of("_hta_facts"),
        CheckedEstimate(
            55.0,  # exact HTA, 25-28 pieces on average: the check's examples, and where it misses
            lambda config: config.get("check_examples", CHECK_MIN_EXAMPLES),
            lambda config: config.get("hta_method", DEFAULT_HTA_METHOD),
        ),
    ),
    StepRule(
        r"finetuned_.*",
        {"max_steps": QUICK_FINETUNE_STEPS, "train_subset": QUICK_TRAIN_EXAMPLES},
        "training steps",
        FINETUNE_SECONDS_PER_STEP,
        10.0,
        _finetune_steps,
    ),
    StepRule(
        r"[a-z0-9]+_ablation",
        {"max_examples": QUICK_ABLATION_EXAMPLES},
        "setting x examples",
        0.009,
        5.0,
        _ablation_settings,
    ),
    StepRule(
        _CORPUS + "_finetune_similarity",
        {"max_examples": QUICK_EXAMPLES},
        "examples",
        0.02,
        2.0,
        _examples_of("_finetune_similarity"),
    ),
    StepRule(r"grad_importance", {"max_examples": QUICK_ABLATION_EXAMPLES}, "examples", 0.3, 5.0, _gradient_examples),
    StepRule(
        r"dependency_probes",
        {"max_sentences": QUICK_PROBE_SENTENCES},
        "sentences",
        0.02,
        3.0,
        _probe_sentences,
    ),
    StepRule(_CORPUS + "_head_matches", {"max_examples": 16}, "steps", 0.0, 10.0, _one),
    # a fine-tuned classifier's forward and backward with every weighting's maps (docs/papers/compare.md):
    # 28.4 s for 200 SST-2 examples in the quick reproduction of 2026-11-29
    StepRule(r"weighting_faithfulness", {}, "examples", 0.12, 5.0, _faithfulness_examples),
    StepRule(r"paper_report", {}, "steps", 0.0, 110.0, _one),  # draws the named heads' example maps
    StepRule(r".*", {}, "steps", 0.0, 2.0, _one),  # charts, views, models, baselines
)


def rule_for(asset: str) -> StepRule:
    return next(rule for rule in RULES if re.fullmatch(rule.assets, asset))


@dataclass(frozen=True)
class PlannedStep:
    asset: str
    units: int
    unit: str
    seconds: float  # where a checked estimator passes its check
    fallback_seconds: float | None = None  # where it misses and the step falls back to its exact method
    fallback_reason: str | None = None  # why the fallback is expected (expected_fallback); None: it is not

    @property
    def expected_seconds(self) -> float:
        """The seconds the plan counts: the fallback's where it is expected."""
        return self.fallback_seconds if self.fallback_reason and self.fallback_seconds is not None else self.seconds


def planned_step(asset: str, profile: str, model: ModelShape, config: dict | None = None) -> PlannedStep:
    """The step of `asset` under `profile` for `model`: its size and estimated seconds. `config`: the
    asset's run config (default: the profile's), whose limits (max_examples, train_subset, ...) size it.
    A checked estimator's step costs its check's units twice (exact and estimated), then the others by
    the estimator, or by the exact method where it misses (fallback_seconds: None where that costs the same)."""
    rule = rule_for(asset)
    if config is None:
        config = rule.quick_config if profile == "quick" else {}
    units = rule.units(asset, profile, model, config)
    estimated = rule.seconds_per_unit * model.scale
    if rule.checked is None:
        return PlannedStep(asset, units, rule.unit, rule.fixed_seconds + estimated * units)
    exact = rule.checked.exact_seconds_per_unit * model.scale
    if rule.checked.method(config) == "exact":
        return PlannedStep(asset, units, rule.unit, rule.fixed_seconds + exact * units)
    check = min(rule.checked.check_units(config), units)
    checking = rule.fixed_seconds + check * (exact + estimated)
    if check == units:  # the check's exact units are every unit: they are the facts, pass or miss
        return PlannedStep(asset, units, rule.unit, checking)
    return PlannedStep(asset, units, rule.unit, checking + units * estimated, checking + (units - check) * exact)


@dataclass(frozen=True)
class HtaCheckRecord:
    """What an HTA step's latest materialization recorded of its estimator check."""

    asset: str
    method: str  # the run config's hta_method
    within_tolerance: bool | None  # the estimator's verdict; None: a record from before it was kept
    check_examples: int | None


def _hta_check_record(instance: DagsterInstance, asset: str, model_id: str) -> HtaCheckRecord | None:
    record = latest_materialization(instance, AssetKey(asset), model_id)
    materialization = record.asset_materialization if record else None
    if materialization is None or "hta_method" not in materialization.metadata:
        return None
    values = {name: value.value for name, value in materialization.metadata.items()}
    method, used = str(values["hta_method"]), str(values.get("hta_method_used", values["hta_method"]))
    within = values.get("estimator_within_tolerance")
    # a record from before the verdict was kept: a fallback is a miss; a pass on its (then 1-example) check says nothing
    within = bool(within) if within is not None else (False if used != method else None)
    examples = values.get("check_examples")
    return HtaCheckRecord(asset, method, within, None if examples is None else int(examples))


def expected_fallback(
    instance: DagsterInstance, model_id: str, asset: str, method: str, others: list[str]
) -> str | None:
    """Why `asset`'s estimator `method` is expected to miss its check for `model_id` (its steps then
    counted at the exact method's cost), or None where it is expected to pass. The rule, from the
    latest materializations of the model's HTA steps (`asset` and `others`) that ran `method`: the
    step's own last verdict decides; else a miss on any of the others; else a pass on any of them
    judged on at least CHECK_MIN_EXAMPLES examples; with none of these, no check has shown that the
    estimator passes on this model, and the plan assumes it misses."""
    records = [_hta_check_record(instance, name, model_id) for name in [asset, *others]]
    same = [record for record in records if record is not None and record.method == method]
    own = same[0] if same and same[0].asset == asset else None
    if own is not None and own.within_tolerance is False:
        return "its check missed on its last run for this model"
    if own is not None and own.within_tolerance:
        return None
    if missed := [record.asset for record in same if record.within_tolerance is False]:
        return f"its check missed on {missed[0]}'s last run for this model"
    judged = [
        record for record in same if record.within_tolerance and (record.check_examples or 0) >= CHECK_MIN_EXAMPLES
    ]
    if judged:
        return None
    return f"no check of {method} on {CHECK_MIN_EXAMPLES} or more examples has passed for this model yet"


def with_expected_fallbacks(
    steps: list[PlannedStep], instance: DagsterInstance, model_id: str, ops: dict
) -> list[PlannedStep]:
    """`steps` with the reason of each expected fallback (expected_fallback) on the steps that have one;
    `ops`: the run's run config per asset (the profile's with the user's values)."""
    checked = [step.asset for step in steps if rule_for(step.asset).checked is not None]
    planned = []
    for step in steps:
        checks = rule_for(step.asset).checked
        reason = None
        if step.fallback_seconds is not None and checks is not None:
            method = checks.method(ops.get(step.asset, {}).get("config", {}))
            others = [asset for asset in checked if asset != step.asset]
            reason = expected_fallback(instance, model_id, step.asset, method, others)
        planned.append(replace(step, fallback_reason=reason))
    return planned


def profile_run_config(assets: list[str], profile: str) -> dict:
    """Run config (the launchpad's format) of `profile` for the assets of a run."""
    if profile == "paper":
        return {}
    ops = {asset: {"config": rule_for(asset).quick_config} for asset in assets if rule_for(asset).quick_config}
    return {"ops": ops} if ops else {}
