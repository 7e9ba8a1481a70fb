"""One forward pass per (model, corpus) -> every fact kind the corpus gets (docs/methods.md §3).

The statistics are taken as the forward finishes each layer (compute.layer_maps), on that layer's
batch x head block at once, so a pass holds one layer's maps at a time; each kind's collector
(compute.fact_kinds) takes the layer's maps and their head summaries; a kind that compares layers (head
distances) keeps only what it needs of each (the real query rows). They run on the encoder's device, in
float32 whatever the forward dtype, and their rows come back to the CPU. The same forward feeds the
other weightings (compute/weightings.py, docs/methods.md §3.9), layer by layer too: the weighted kinds
also run on their maps, with head summaries of their own.
"""

import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass

import polars as pl
import torch

from dagster_project.compute.attention_facts import summary_columns
from dagster_project.compute.backoff import BackOff
from dagster_project.compute.batching import Batch, length_batches
from dagster_project.compute.checks import CheckOutcome
from dagster_project.compute.devices import float32_maps
from dagster_project.compute.fact_kinds import (
    ALWAYS,
    FACT_KINDS,
    HEAD_MAP_EXAMPLES,
    Collector,
    FactKind,
    PassInputs,
    WeightedRows,
    attention_rows,
    kind_checks,
)
from dagster_project.compute.layer_maps import finished_layers
from dagster_project.compute.metrics import PatternThresholds
from dagster_project.compute.models import LoadedEncoder
from dagster_project.compute.pass_timings import PassTimings, phase, phase_of_each, timing
from dagster_project.compute.weightings import (
    LayerCapture,
    LayerWeightings,
    ModelWeightings,
    captured_layers,
    check_weightings,
)


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
    encoder: LoadedEncoder,
    tokens: pl.DataFrame,
    words: pl.DataFrame | None = None,
    figure_examples: Sequence[int] = (),
    **options,
) -> PassInputs:
    """The PassInputs of a pass over `tokens` (options: frame_links, word_mode, thresholds); the
    examples whose whole maps are kept are the first HEAD_MAP_EXAMPLES by example_id and
    `figure_examples` (fact_kinds.figure_5_examples)."""
    spec = encoder.spec
    example_ids = tokens["example_id"].unique().sort()
    return PassInputs(
        example_ids.len(),
        spec.n_layers,
        spec.n_heads,
        words,
        map_examples=tuple(sorted({*example_ids.head(HEAD_MAP_EXAMPLES).to_list(), *figure_examples})),
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
    weightings: Sequence[str] = ("attention",),
) -> AttentionFacts:
    """Run the model once over a tokenized corpus and collect every kind's rows.

    `tokens` has the columns of the warehouse `tokens` table for one (model, corpus); `inputs`
    (default: `pass_inputs` without words) carries what kinds read besides the maps.
    `progress(done, total, seconds)` is called after each batch. `batch_tokens` (padded positions
    per batch) defaults by the encoder's device; a pass that runs out of device memory starts again
    with half the budget (logged; the facts asset's run config batch_tokens starts there), down to
    the longest example's pieces (then compute.backoff.PassOutOfMemory). `timings`,
    when given, receives the seconds of each phase (compute.pass_timings; the pass then waits for the
    device between phases).

    `weightings` (compute.weightings.WEIGHTINGS; attention is always taken): the weighted kinds (head
    summaries, position histograms, relation hits) also run on each other weighting's maps, their rows
    tagged with `weighting` (the per-layer weightings' with head 0), and with norm the value_norms rows are
    written. globenc, alti and value_zeroing refuse a family whose LayerNorms the layout does not name.
    """
    inputs = inputs or pass_inputs(encoder, tokens)
    weightings = check_weightings(tuple(weightings))
    kinds = [*(FACT_KINDS[name] for name in ALWAYS if FACT_KINDS[name] not in kinds), *kinds]
    kinds = [kind for kind in kinds if not kind.reads_norms]
    if "norm" in weightings:
        kinds += [kind for kind in FACT_KINDS.values() if kind.reads_norms]
    budget = batch_tokens or encoder.compute.batch_tokens()
    longest = int(tokens.group_by("example_id").len()["len"].max() or 0)
    # A pass writes nothing itself and returns its rows only once finished: a retry starts from nothing.
    back_off = BackOff(
        "the attention pass",
        "batch_tokens",
        f"Its longest example has {longest} pieces: lower the corpus's max_len (run config of its corpus asset), "
        "set ATTN_DTYPE=bfloat16, or run on a device with more memory (ATTN_DEVICE). Nothing was written.",
        encoder.compute.device,
        smallest=longest,
    )
    return back_off.retrying(
        lambda budget: _pass(encoder, tokens, kinds, inputs, budget, progress, timings, weightings), budget
    )


@dataclass
class _LayerStatistics:
    """Every kind's statistics of a pass's batches, taken as the forward finishes each layer (one layer's
    maps at a time)."""

    collectors: dict[tuple[str, str], Collector]  # (weighting, table) -> collector
    reads_norms: set[str]
    inputs: PassInputs
    weightings: ModelWeightings
    captured: LayerCapture | None
    batch: Batch | None = None
    stepper: LayerWeightings | None = None

    def start(self, batch: Batch) -> None:
        self.batch = batch
        self.stepper = self.weightings.stepper(batch.masks.valid)

    def layer(self, index: int, probabilities: torch.Tensor) -> None:
        """Layer `index`'s (B, H, T, T) probabilities, as the forward finishes the layer."""
        batch, first_layer = self.batch, index + 1
        with phase("statistics"):
            attn = float32_maps((probabilities,))
            weighted = self.stepper.layer(index, attn, self.captured.take() if self.captured else None)
            for weighting, maps in weighted.maps.items():
                summaries = summary_columns(maps, batch, self.inputs.thresholds, first_layer)
                for (collector_weighting, table), collector in self.collectors.items():
                    if collector_weighting == weighting and table not in self.reads_norms:
                        collector.add(maps, batch, summaries, first_layer)
            for table in self.reads_norms:
                self.collectors["attention", table].add(weighted.norms, batch, {}, first_layer)


def _pass(
    encoder: LoadedEncoder,
    tokens: pl.DataFrame,
    kinds: Sequence[FactKind],
    inputs: PassInputs,
    batch_tokens: int,
    progress: Callable[[int, int, float], None] | None,
    timings: PassTimings | None,
    weightings: tuple[str, ...],
) -> AttentionFacts:
    # (weighting, table) -> collector: every kind on the attention maps, the weighted kinds on every
    # weighting's, the value norms' kinds once
    collectors: dict[tuple[str, str], Collector] = {}
    for kind in kinds:
        for weighting in weightings if kind.weighted else ("attention",):
            collector = kind.start(inputs)
            collectors[weighting, kind.table] = WeightedRows(collector, weighting) if kind.weighted else collector
    chosen = ModelWeightings.of(encoder.model, weightings)
    started = time.perf_counter()
    done = 0
    batches = length_batches(
        tokens,
        encoder.tokenizer.pad_token_id or 0,
        batch_tokens,
        encoder.spec.takes_token_types,
        inputs.words,
    )
    states = captured_layers(encoder.model, chosen.needs_norms) if chosen.needs_states else nullcontext(None)
    with torch.inference_mode(), timing(timings), states as captured:
        statistics = _LayerStatistics(
            collectors,
            {kind.table for kind in kinds if kind.reads_norms},
            inputs,
            chosen,
            captured,
        )
        with finished_layers(encoder.model, statistics.layer) as forward_options:
            for batch in phase_of_each(batches, "frames"):
                with phase("forward"):
                    batch = batch.to(encoder.compute.device)
                    statistics.start(batch)
                    encoder.model(**batch.inputs, **forward_options)
                done += len(batch.example_ids)
                if progress:
                    progress(done, inputs.n_examples, time.perf_counter() - started)
        with phase("frames"):
            tables = _tables(collectors)
    return AttentionFacts(tables, done, time.perf_counter() - started)


def _tables(collectors: dict[tuple[str, str], Collector]) -> dict[str, pl.DataFrame]:
    """Each table's rows: a weighted kind's rows of every weighting one after the other, attention's first."""
    parts: dict[str, list[pl.DataFrame]] = {}
    for (_, table), collector in collectors.items():
        parts.setdefault(table, []).append(collector.finish())
    return {
        table: pl.concat([frame for frame in frames if not frame.is_empty()] or frames[:1])
        for table, frames in parts.items()
    }


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
    weightings: Sequence[str] = ("attention",),
    figure_examples: Sequence[int] = (),
) -> CheckedAttentionFacts:
    """The pass of a (model, corpus) for `kinds` (`extract_attention_facts` over `pass_inputs`),
    with the kinds' checks evaluated on its rows; the pattern shares are those of the attention maps."""
    inputs = pass_inputs(
        encoder,
        tokens,
        words,
        figure_examples,
        frame_links=frame_links,
        feature_links=feature_links,
        word_mode=word_mode,
        thresholds=thresholds,
    )
    facts = extract_attention_facts(encoder, tokens, kinds, inputs, batch_tokens, progress, weightings=weightings)
    summaries = attention_rows(facts.tables["head_summaries"])
    shares = summaries["pattern"].value_counts(normalize=True, name="share")
    return CheckedAttentionFacts(
        facts,
        [check.evaluate(facts.tables, inputs) for check in kind_checks(kinds)],
        {row["pattern"]: round(row["share"], 4) for row in shares.iter_rows(named=True)},
        float(summaries["row_sum_error"].max()),
    )
