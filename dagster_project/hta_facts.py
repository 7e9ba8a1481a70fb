"""HTA facts of a tokenized corpus: per (example, layer, head) correlations of attention
with both contributions, and relative-position histograms of the input contribution."""

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import polars as pl
import torch

from dagster_project.facts import SCOPES, frame, head_columns, histogram_columns, histogram_frame, length_batches
from dagster_project.hta import HtaMethod, attention_weights, input_norms, normalize_rows, previous_layer_norms, row_correlations
from dagster_project.models import LoadedEncoder

CONTRIBUTION_KINDS = ("previous_layer", "input")


@dataclass(frozen=True)
class HtaFacts:
    correlations: pl.DataFrame  # example_id, layer, head, kind, pearson, spearman
    histograms: pl.DataFrame  # as position_histograms, kind = contribution
    n_examples: int
    seconds: float


@dataclass(frozen=True)
class ExampleMaps:
    """Attention and both contribution maps of one example, (L, H, n, n) each."""

    attention: torch.Tensor
    previous_layer: torch.Tensor
    input: torch.Tensor


def example_maps(encoder: LoadedEncoder, inputs: dict[str, torch.Tensor], method: HtaMethod, seed: int) -> ExampleMaps:
    """One example (batch of 1, no padding): its attention, previous-layer and input contributions."""
    model = encoder.model
    with torch.no_grad():
        output = model(**inputs, output_attentions=True, output_hidden_states=True)
    hidden = torch.stack(output.hidden_states[:-1])[:, 0]  # inputs of every layer, (L, n, D)
    return ExampleMaps(
        attention=torch.stack(output.attentions)[:, 0],
        previous_layer=normalize_rows(previous_layer_norms(attention_weights(model), hidden)),
        input=normalize_rows(input_norms(model, hidden[0], method, torch.Generator().manual_seed(seed))),
    )


def extract_hta_facts(
    encoder: LoadedEncoder,
    tokens: pl.DataFrame,
    method: HtaMethod,
    seed: int = 0,
    progress: Callable[[int, int, float], None] | None = None,
) -> HtaFacts:
    """HTA of every example of a `tokens` frame, one example at a time (the input
    contribution's tangents already fill the machine for one example)."""
    started = time.perf_counter()
    total = tokens["example_id"].n_unique()
    correlation_parts: list[dict[str, np.ndarray]] = []
    histogram_parts: dict[str, list[dict[str, np.ndarray]]] = {scope: [] for scope in SCOPES}
    for done, batch in enumerate(length_batches(tokens, encoder.tokenizer.pad_token_id or 0, 1, encoder.spec.takes_token_types), 1):
        maps = example_maps(encoder, batch.inputs, method, seed + int(batch.example_ids[0]))
        for kind in CONTRIBUTION_KINDS:
            pearson, spearman = row_correlations(maps.attention, getattr(maps, kind))
            columns = head_columns({"pearson": pearson[None], "spearman": spearman[None]}, batch.example_ids)
            correlation_parts.append({**columns, "kind": np.full(len(columns["layer"]), kind)})
        for scope, columns in histogram_columns(maps.input[None], batch.masks, batch.example_ids).items():
            histogram_parts[scope].append(columns)
        if progress:
            progress(done, total, time.perf_counter() - started)
    return HtaFacts(
        correlations=frame(correlation_parts).with_columns(hta_method=pl.lit(str(method))),
        histograms=histogram_frame(histogram_parts, "contribution").with_columns(hta_method=pl.lit(str(method))),
        n_examples=total,
        seconds=time.perf_counter() - started,
    )
