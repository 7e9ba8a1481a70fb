"""HTA facts of a tokenized corpus: per (example, layer, head) correlations of attention
with both contributions, relative-position histograms of the input contribution, and per (example,
layer, weighting, aggregation) the agreement of the weightings' maps with it (from the same
forward, compute/compare/hta_agreement.py); and a run's protocol (checked_hta_facts): the estimator
checked against exact HTA first, then the facts with their contribution sums checked."""

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np
import polars as pl
import torch

from dagster_project.compute.batching import (
    first_examples,
    frame,
    head_columns,
    histogram_frame,
    histogram_rows,
    length_batches,
)
from dagster_project.compute.checks import CheckOutcome, estimate_matches_exact, histogram_masses
from dagster_project.compute.compare.hta_agreement import agreement_columns, example_attributions, layer_contributions
from dagster_project.compute.metrics import (
    PATTERNS,
    PatternThresholds,
    head_summaries,
    map_pattern_classes,
)
from dagster_project.compute.models import LoadedEncoder
from dagster_project.compute.pascual.hta import (
    PUBLISHED_TOLERANCES,
    EstimateError,
    HtaMethod,
    compare_contributions,
    input_norms,
    jackknife_gap_errors,
    layer_input_norms,
    normalize_rows,
    published_gaps,
    published_quantities,
    row_correlations,
)
from dagster_project.compute.pascual.saved_contributions import SavedContributions
from dagster_project.compute.weightings import WEIGHTINGS, ModelWeightings, captured_layers

# The HTA run's default method. It passes the run's estimator check on MiniLM with a margin at 0.8x the cost of
# estimate(32,bf16), the cheapest plain estimator that passes (hutchpp(12,8,bf16) is cheaper but passes by 0.001;
# bench/bench_hta.py, docs/benchmarks.md).
DEFAULT_HTA_METHOD = "hutchpp(16,8,bf16)"
CONTRIBUTION_KINDS = ("previous_layer", "input")
CONTRIBUTION_CHECK = "Input contributions of every query row sum to 1; histogram pairs sum to n^2."


@dataclass(frozen=True)
class PreviousLayerCost:
    """What the previous-layer contributions took: jvps is 0 for the closed form, else one per
    coordinate of each layer's input (the per-layer jvp fallback, e.g. DeBERTa)."""

    jvps: int = 0
    seconds: float = 0.0

    @property
    def method(self) -> str:
        """How the previous-layer contributions were computed, as the asset's metadata reports it:
        `closed form`, or `per-layer jvp (exact)` when any jvp was taken."""
        return "per-layer jvp (exact)" if self.jvps else "closed form"

    def __add__(self, other: "PreviousLayerCost") -> "PreviousLayerCost":
        return PreviousLayerCost(self.jvps + other.jvps, self.seconds + other.seconds)


@dataclass(frozen=True)
class HtaFacts:
    correlations: pl.DataFrame  # example_id, layer, head, kind, pearson, spearman (means over rows), n_rows
    histograms: pl.DataFrame  # dense rows as in contribution_histograms (batching.histogram_frame)
    example_maps: pl.DataFrame  # full maps of one example per attention-pattern class
    agreement: pl.DataFrame  # example_id, aggregation, layer, weighting, spearman (mean over rows), n_rows
    n_examples: int
    seconds: float
    previous_layer_cost: PreviousLayerCost

    @property
    def tables(self) -> dict[str, pl.DataFrame]:
        """Warehouse table -> rows."""
        return {
            "hta_correlations": self.correlations,
            "contribution_histograms": self.histograms,
            "hta_example_maps": self.example_maps,
            "hta_agreement": self.agreement,
        }


@dataclass(frozen=True)
class CheckedHtaFacts:
    """A run's HTA facts and its check outcomes."""

    facts: HtaFacts
    outcomes: list[CheckOutcome]  # the contributions' sums, then the estimator against exact HTA
    method: HtaMethod  # the method the facts were computed by: the run's, or exact where it missed its check


@dataclass(frozen=True)
class ExampleMaps:
    """Attention and both contribution maps of one example, (L, H, n, n) each, and what the
    previous-layer map cost; the input contribution of every head at once, (L, n, n)
    (hta_agreement.layer_contributions), and with weightings their maps per layer and rolled out, (A, W, L, n, n)."""

    attention: torch.Tensor
    previous_layer: torch.Tensor
    input: torch.Tensor
    previous_layer_cost: PreviousLayerCost
    layer_input: torch.Tensor
    attributions: torch.Tensor | None = None


def example_maps(
    encoder: LoadedEncoder,
    inputs: dict[str, torch.Tensor],
    method: HtaMethod,
    seed: int,
    weightings: ModelWeightings | None = None,
    saved: SavedContributions | None = None,
) -> ExampleMaps:
    """One example (batch of 1, no padding): its attention, previous-layer and input contributions,
    and the maps of `weightings` (per layer and rolled out) from the same forward. The input
    contribution, the costly part, is taken from `saved` where a killed run saved it, and saved there
    otherwise."""
    model = encoder.model
    with_norms = weightings is not None and weightings.needs_norms
    with captured_layers(model, with_norms) as captured, torch.no_grad():
        output = model(**inputs, output_attentions=True, output_hidden_states=True)
        attention = torch.stack(output.attentions)[:, 0]
        attributions = example_attributions(weightings, attention[None], captured.take()) if weightings else None
    hidden = torch.stack(output.hidden_states[:-1])[:, 0]  # inputs of every layer, (L, n, D)
    started = time.perf_counter()
    previous, jvps = layer_input_norms(model, hidden)
    cost = PreviousLayerCost(jvps, time.perf_counter() - started)

    def contribution_norms() -> torch.Tensor:
        generator = torch.Generator().manual_seed(seed)
        return input_norms(model, hidden[0], method, generator, first_layer_norms=previous[0])

    norms = saved.norms(inputs, method, seed, contribution_norms) if saved else contribution_norms()
    return ExampleMaps(
        attention=attention,
        previous_layer=normalize_rows(previous),
        input=normalize_rows(norms),
        previous_layer_cost=cost,
        layer_input=layer_contributions(norms),
        attributions=attributions,
    )


def _map_rows(maps: ExampleMaps, example_id: int, pattern: str) -> pl.DataFrame:
    """Every (layer, head, query, key) cell of an example's three maps."""
    layers, heads, n, _ = maps.attention.shape
    index = np.stack(np.meshgrid(*(np.arange(size) for size in (layers, heads, n, n)), indexing="ij")).reshape(4, -1)
    return pl.DataFrame(
        {
            "example_id": np.full(index.shape[1], example_id, dtype=np.int32),
            "pattern": pattern,
            "layer": (index[0] + 1).astype(np.int16),
            "head": (index[1] + 1).astype(np.int16),
            "query": index[2].astype(np.int16),
            "key": index[3].astype(np.int16),
            **{kind: getattr(maps, kind).reshape(-1).cpu().numpy() for kind in ("attention", *CONTRIBUTION_KINDS)},
        }
    )


def extract_hta_facts(
    encoder: LoadedEncoder,
    tokens: pl.DataFrame,
    method: HtaMethod,
    seed: int = 0,
    progress: Callable[[int, int, float], None] | None = None,
    thresholds: PatternThresholds = PatternThresholds(),
    weightings: ModelWeightings | None = None,
    known: Mapping[int, ExampleMaps] | None = None,
    saved: SavedContributions | None = None,
) -> HtaFacts:
    """HTA of every example of a `tokens` frame, one example at a time (the input
    contribution's tangents already fill the machine for one example), and the agreement of
    the maps of `weightings` (None: every one of WEIGHTINGS) with it. `known`
    holds maps already computed by `method` with the same weightings (by example id, e.g. the
    estimator check's exact ones): those examples are not computed again. With `saved`, each example's
    input contribution is saved as it is computed, and one a killed run saved is not computed again.

    For Pascual's Fig. 7 / appendix C, the full maps of one example per Kovaleva pattern
    class are kept (a few MB): the example with the most heads of that class (rules of
    `pattern_classes`).
    """
    if encoder.compute.low_precision:
        raise ValueError(
            f"HTA takes derivatives, so it needs the encoder in float32, not {encoder.compute}: "
            "load it with load_encoder(source, compute.float32())."
        )
    weightings = weightings or ModelWeightings.of(encoder.model, WEIGHTINGS)
    known = known or {}
    started = time.perf_counter()
    total = tokens["example_id"].n_unique()
    correlation_parts: list[dict[str, np.ndarray]] = []
    agreement_parts: list[dict[str, np.ndarray]] = []
    histogram_parts: list[pl.DataFrame] = []
    best: dict[str, tuple[int, int, ExampleMaps]] = {}  # pattern -> (heads of that pattern, example id, maps)
    previous_layer_cost = PreviousLayerCost()
    for done, batch in enumerate(
        length_batches(tokens, encoder.tokenizer.pad_token_id or 0, 1, encoder.spec.takes_token_types), 1
    ):
        batch = batch.to(encoder.compute.device)
        example_id = int(batch.example_ids[0])
        maps = known.get(example_id) or example_maps(
            encoder, batch.inputs, method, seed + example_id, weightings, saved
        )
        previous_layer_cost += maps.previous_layer_cost
        agreement_parts.append(
            agreement_columns(maps.attributions, maps.layer_input, weightings.weightings, example_id)
        )
        for kind in CONTRIBUTION_KINDS:
            pearson, spearman, n_rows = row_correlations(maps.attention, getattr(maps, kind))
            # n_rows, the query rows with a correlation: the corpus mean weights the example's
            # mean by them, so every attention-contribution row pair counts once
            columns = head_columns(
                {"pearson": pearson[None], "spearman": spearman[None], "n_rows": n_rows[None].to(torch.int16)},
                batch.example_ids,
            )
            correlation_parts.append({**columns, "kind": np.full(len(columns["layer"]), kind)})
        histogram_parts.append(histogram_frame(maps.input[None], batch.masks, batch.example_ids))
        attention = maps.attention[None]
        classes = map_pattern_classes(attention, head_summaries(attention, batch.masks), batch.masks, thresholds)
        for index, count in enumerate(torch.bincount(classes.flatten(), minlength=len(PATTERNS)).tolist()):
            if count > best.get(PATTERNS[index], (0,))[0]:
                best[PATTERNS[index]] = (count, int(batch.example_ids[0]), maps)
        if progress:
            progress(done, total, time.perf_counter() - started)
    example_rows = [_map_rows(maps, example_id, pattern) for pattern, (_, example_id, maps) in best.items()]
    return HtaFacts(
        # a map without a row with a correlation has none (NULL, left out of the means)
        correlations=frame(correlation_parts).with_columns(
            pl.col("pearson", "spearman").fill_nan(None), hta_method=pl.lit(str(method))
        ),
        histograms=pl.concat(histogram_parts).with_columns(hta_method=pl.lit(str(method))),
        example_maps=pl.concat(example_rows).with_columns(hta_method=pl.lit(str(method))),
        agreement=frame(agreement_parts).with_columns(
            pl.col("spearman").fill_nan(None), hta_method=pl.lit(str(method))
        ),
        n_examples=total,
        seconds=time.perf_counter() - started,
        previous_layer_cost=previous_layer_cost,
    )


def check_sample(tokens: pl.DataFrame, n_examples: int, seed: int) -> list[int]:
    """A seeded sample of `n_examples` example ids spread over the length range: the examples
    ranked by length are cut into `n_examples` strata of (nearly) equal size and one example is
    drawn from each. All examples when there are no more than that."""
    lengths = tokens.group_by("example_id").agg(n_tokens=pl.len()).sort("n_tokens", "example_id")
    if lengths.height <= n_examples:
        return lengths["example_id"].to_list()
    edges = np.linspace(0, lengths.height, n_examples + 1).astype(int)
    rows = np.random.default_rng(seed).integers(edges[:-1], edges[1:])
    return lengths["example_id"].gather(rows).to_list()


@dataclass(frozen=True)
class EstimateCheck:
    """The run's estimator against exact HTA on the check examples: the contributions' Pearson
    per layer, the published quantities' gaps (hta.published_gaps) with their jackknife standard
    errors over the examples (hta.jackknife_gap_errors), and the exact maps by example id (a run that
    falls back to exact HTA does not compute them again)."""

    error: EstimateError
    published_gaps: dict[str, dict[int, float]]
    examples: list[int]
    exact_maps: dict[int, ExampleMaps] = field(default_factory=dict)
    gap_errors: dict[str, dict[int, float]] = field(default_factory=dict)


def estimate_check_error(
    encoder: LoadedEncoder,
    tokens: pl.DataFrame,
    method: HtaMethod,
    n_examples: int,
    seed: int = 0,
    weightings: ModelWeightings | None = None,
    saved: SavedContributions | None = None,
) -> EstimateCheck:
    """The run's estimator against exact HTA on `check_sample`'s examples, with the probes the
    run draws for them (seed + example id); the exact maps carry the attributions of `weightings`.
    Both contributions are saved in (and taken from) `saved`, as in extract_hta_facts."""
    chosen = check_sample(tokens, n_examples, seed)
    if method.probes is None:
        return EstimateCheck(EstimateError({}, 0.0), {}, chosen)
    sample = tokens.filter(pl.col("example_id").is_in(chosen))
    exact_maps: dict[int, ExampleMaps] = {}
    estimated = []
    for batch in length_batches(sample, encoder.tokenizer.pad_token_id or 0, 1, encoder.spec.takes_token_types):
        batch = batch.to(encoder.compute.device)
        example_id = int(batch.example_ids[0])
        exact_maps[example_id] = example_maps(
            encoder, batch.inputs, HtaMethod(None), seed + example_id, weightings, saved
        )
        estimated.append(example_maps(encoder, batch.inputs, method, seed + example_id, saved=saved).input)
    attention = [maps.attention for maps in exact_maps.values()]
    exact = [maps.input for maps in exact_maps.values()]
    gaps = published_gaps(published_quantities(attention, exact), published_quantities(attention, estimated))
    errors = jackknife_gap_errors(attention, exact, estimated)
    return EstimateCheck(compare_contributions(exact, estimated), gaps, chosen, exact_maps, errors)


def checked_hta_facts(
    encoder: LoadedEncoder,
    tokens: pl.DataFrame,
    method: HtaMethod,
    *,
    max_examples: int | None,
    seed: int,
    check_examples: int,
    check_min_pearson: float,
    fallback_to_exact: bool,
    progress: Callable[[int, int, float], None],
    checked: Callable[[CheckOutcome], None],
    weightings: list[str] | tuple[str, ...] = WEIGHTINGS,
    saved: SavedContributions | None = None,
) -> CheckedHtaFacts:
    """HTA facts of the first `max_examples` examples by id (None: all) of a corpus's `tokens`,
    their contributions' sums checked. First the estimator is checked against exact HTA on
    `check_examples` of the examples it writes (`estimate_check_error`; on fewer than
    checks.CHECK_MIN_EXAMPLES of more written, each gap judged by its one-sided 95% upper bound): the
    examples the facts come from, and a fallback to exact HTA (`fallback_to_exact`, where the estimator
    misses) computes only the others again; where the check saw every written example, its exact
    maps are the facts. The check's metadata says which method the facts used
    (`hta_method_used`). `checked` receives the estimator's outcome before any fact is computed,
    so it can stop the run. The agreement with HTA is taken for `weightings` (refused, like an
    unknown weighting, before anything is computed where the model's family does not allow one). With
    `saved`, every input contribution computed is saved there, and a run killed part way resumes from them."""
    chosen = ModelWeightings.of(encoder.model, weightings)
    selected = first_examples(tokens, max_examples)
    check = estimate_check_error(encoder, selected, method, check_examples, seed, chosen, saved)
    estimate = estimate_matches_exact(
        check.error.layer_pearson,
        check.error.mean_abs_error,
        check_min_pearson,
        str(method),
        check.examples,
        check.published_gaps,
        PUBLISHED_TOLERANCES,
        check.gap_errors,
        written=selected["example_id"].n_unique(),
    )
    checked(estimate)
    # where the check computed every written example exactly, those exact maps are the facts
    covered = len(check.examples) >= estimate.metadata["written_examples"]
    used = method if (estimate.passed or not fallback_to_exact) and not covered else HtaMethod(None)
    # the written facts are within tolerance when the estimator is, or when they are exact
    estimate = CheckOutcome(
        estimate.name,
        estimate.passed or used.probes is None,
        estimate.description + " Where it misses, the run falls back to exact HTA (run config fallback_to_exact).",
        estimate.metadata | {"estimator_within_tolerance": estimate.passed, "hta_method_used": str(used)},
    )
    known = check.exact_maps if used.probes is None else None
    facts = extract_hta_facts(encoder, selected, used, seed, progress, weightings=chosen, known=known, saved=saved)
    lengths = selected.group_by("example_id").agg(n_tokens=pl.len())
    sums = histogram_masses(
        histogram_rows(facts.histograms, "contribution"), lengths, "contributions_sum_to_one", CONTRIBUTION_CHECK
    )
    return CheckedHtaFacts(facts, [sums, estimate], used)
