"""One forward pass per (model, corpus) -> every fact kind the corpus gets (docs/methods.md §3).

The statistics run on the whole batch x layer x head block at once; each kind's collector
(compute.fact_kinds) takes the batch's attention maps and its head summaries. They run on the
encoder's device, in float32 whatever the forward dtype, and their rows come back to the CPU.
"""

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import polars as pl
import torch

from dagster_project.compute.attention_facts import summary_columns
from dagster_project.compute.batching import length_batches
from dagster_project.compute.checks import CheckOutcome
from dagster_project.compute.devices import float32_maps
from dagster_project.compute.fact_kinds import (
    ALWAYS,
    FACT_KINDS,
    HEAD_MAP_EXAMPLES,
    FactKind,
    PassInputs,
    kind_checks,
)
from dagster_project.compute.metrics import PatternThresholds
from dagster_project.compute.models import LoadedEncoder
from dagster_project.compute.pass_timings import PassTimings, phase, timing

LOG = logging.getLogger(__name__)


class PassOutOfMemory(RuntimeError):
    """A pass that does not fit the device's memory even at its smallest batch."""


@dataclass(frozen=True)
class AttentionFacts:
    tables: dict[str, pl.DataFrame]  # fact kind table -> rows (empty frame: the pass found none)
    n_examples: int
    seconds: float


@dataclass(frozen=True)
class CheckedAttentionFacts:
    """A pass's facts, its kinds' check outcomes, and the figures reported with them."""

    facts: AttentionFacts
    outcomes: list[CheckOutcome]
    pattern_shares: dict[str, float]  # Kovaleva pattern class -> share of the head maps, to 4 decimals
    max_row_sum_error: float


def pass_inputs(
    encoder: LoadedEncoder, tokens: pl.DataFrame, words: pl.DataFrame | None = None, **options
) -> PassInputs:
    """The PassInputs of a pass over `tokens` (options: frame_links, word_mode, thresholds); the
    examples whose whole maps are kept are the first HEAD_MAP_EXAMPLES by example_id."""
    spec = encoder.spec
    example_ids = tokens["example_id"].unique().sort()
    return PassInputs(
        example_ids.len(),
        spec.n_layers,
        spec.n_heads,
        words,
        map_examples=tuple(example_ids.head(HEAD_MAP_EXAMPLES).to_list()),
        **options,
    )


def extract_attention_facts(
    encoder: LoadedEncoder,
    tokens: pl.DataFrame,
    kinds: Sequence[FactKind] = (FACT_KINDS["head_summaries"], FACT_KINDS["position_histograms"]),
    inputs: PassInputs | None = None,
    batch_tokens: int | None = None,
    progress: Callable[[int, int, float], None] | None = None,
    timings: PassTimings | None = None,
) -> AttentionFacts:
    """Run the model once over a tokenized corpus and collect every kind's rows.

    `tokens` has the columns of the warehouse `tokens` table for one (model, corpus); `inputs`
    (default: `pass_inputs` without words) carries what kinds read besides the maps.
    `progress(done, total, seconds)` is called after each batch. `batch_tokens` (padded positions
    per batch) defaults by the encoder's device; a pass that runs out of device memory starts again
    with half the budget (logged), down to one example per batch (then PassOutOfMemory). `timings`,
    when given, receives the seconds of each phase (compute.pass_timings; the pass then waits for the
    device between phases).
    """
    inputs = inputs or pass_inputs(encoder, tokens)
    kinds = [*(FACT_KINDS[name] for name in ALWAYS if FACT_KINDS[name] not in kinds), *kinds]
    budget = batch_tokens or encoder.compute.batch_tokens()
    while True:
        try:
            return _pass(encoder, tokens, kinds, inputs, budget, progress, timings)
        except torch.OutOfMemoryError as error:
            budget = _smaller_budget(encoder, tokens, budget, error)


def _smaller_budget(encoder: LoadedEncoder, tokens: pl.DataFrame, budget: int, error: Exception) -> int:
    """The batch budget to retry a pass with after it ran out of memory at `budget` (half of it, logged),
    or PassOutOfMemory when a batch already held a single example. A pass writes nothing itself, and its
    rows are only returned once it has finished, so a retried pass starts from nothing."""
    device = encoder.compute.device
    if device.type == "cuda":
        torch.cuda.empty_cache()
    longest = int(tokens.group_by("example_id").len()["len"].max() or 0)
    if budget // 2 < longest:
        raise PassOutOfMemory(
            f"The attention pass ran out of memory on {encoder.compute} even with one example per batch "
            f"(batch_tokens={budget}, longest example {longest} pieces): {error}. Lower the corpus's max_len "
            f"(run config of its corpus asset), set ATTN_DTYPE=bfloat16, or run on a device with more memory "
            "(ATTN_DEVICE). Nothing was written."
        ) from error
    LOG.warning(
        f"attention pass: out of memory on {encoder.compute} at batch_tokens={budget}; starting again at "
        f"{budget // 2} (the facts asset's run config batch_tokens={budget // 2} starts there)"
    )
    return budget // 2


def _pass(
    encoder: LoadedEncoder,
    tokens: pl.DataFrame,
    kinds: Sequence[FactKind],
    inputs: PassInputs,
    batch_tokens: int,
    progress: Callable[[int, int, float], None] | None,
    timings: PassTimings | None,
) -> AttentionFacts:
    collectors = {kind.table: kind.start(inputs) for kind in kinds}
    started = time.perf_counter()
    done = 0
    batches = length_batches(
        tokens,
        encoder.tokenizer.pad_token_id or 0,
        batch_tokens,
        encoder.spec.takes_token_types,
        inputs.words,
    )
    with torch.inference_mode(), timing(timings):
        for batch in batches:
            with phase("forward"):
                batch = batch.to(encoder.compute.device)
                attn = float32_maps(encoder.model(**batch.inputs, output_attentions=True).attentions)
            with phase("statistics"):
                summaries = summary_columns(attn, batch, inputs.thresholds)
                for collector in collectors.values():
                    collector.add(attn, batch, summaries)
            done += len(batch.example_ids)
            if progress:
                progress(done, inputs.n_examples, time.perf_counter() - started)
        with phase("frames"):
            tables = {table: collector.finish() for table, collector in collectors.items()}
    return AttentionFacts(tables, done, time.perf_counter() - started)


def checked_attention_facts(
    encoder: LoadedEncoder,
    tokens: pl.DataFrame,
    kinds: Sequence[FactKind],
    words: pl.DataFrame | None,
    *,
    frame_links: pl.DataFrame | None,
    feature_links: pl.DataFrame | None,
    word_mode: str,
    thresholds: PatternThresholds,
    batch_tokens: int | None,
    progress: Callable[[int, int, float], None],
) -> CheckedAttentionFacts:
    """The pass of a (model, corpus) for `kinds` (`extract_attention_facts` over `pass_inputs`),
    with the kinds' checks evaluated on its rows."""
    inputs = pass_inputs(
        encoder,
        tokens,
        words,
        frame_links=frame_links,
        feature_links=feature_links,
        word_mode=word_mode,
        thresholds=thresholds,
    )
    facts = extract_attention_facts(encoder, tokens, kinds, inputs, batch_tokens, progress)
    summaries = facts.tables["head_summaries"]
    shares = summaries["pattern"].value_counts(normalize=True, name="share")
    return CheckedAttentionFacts(
        facts,
        [check.evaluate(facts.tables, inputs) for check in kind_checks(kinds)],
        {row["pattern"]: round(row["share"], 4) for row in shares.iter_rows(named=True)},
        float(summaries["row_sum_error"].max()),
    )
