"""Kovaleva §4.3, Fig. 5: how far fine-tuning moved each head's attention.

The base and the fine-tuned encoder read the same validation batches (two forward passes
by necessity, both streamed); per (example, layer, head) the cosine of the two cropped
n x n maps is kept, nothing n x n is stored. Both run on the base encoder's device and dtype
(load both alike); the cosines are taken in float32.
"""

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import polars as pl
import torch

from dagster_project.compute.backoff import BackOff
from dagster_project.compute.batching import first_examples, frame, head_columns, length_batches
from dagster_project.compute.devices import ComputeDevice, float32_maps
from dagster_project.compute.metrics import map_cosine
from dagster_project.compute.models import LoadedEncoder, load_encoder


def check_comparable(base: LoadedEncoder, tuned: LoadedEncoder) -> None:
    """The fine-tuned model must read the base model's word pieces and have its heads."""
    shapes = [
        (encoder.spec.n_layers, encoder.spec.n_heads, len(encoder.tokenizer), encoder.tokenizer.pad_token_id)
        for encoder in (base, tuned)
    ]
    if shapes[0] != shapes[1]:
        raise ValueError(
            f"Cannot compare attention of '{base.spec.source}' and '{tuned.spec.source}': "
            f"(layers, heads, vocabulary, pad id) differ: {shapes[0]} vs {shapes[1]}. "
            "Fine-tune from the base model so both share tokenizer and architecture."
        )
    if base.compute != tuned.compute:
        raise ValueError(
            f"Load '{base.spec.source}' and '{tuned.spec.source}' on the same device and dtype "
            f"(got {base.compute} and {tuned.compute}): their maps are compared batch by batch."
        )


def extract_finetune_cosines(
    base: LoadedEncoder,
    tuned: LoadedEncoder,
    tokens: pl.DataFrame,
    batch_tokens: int | None = None,
    progress: Callable[[int, int, float], None] | None = None,
) -> tuple[pl.DataFrame, float]:
    """Per (example, layer, head) cosine similarity of base and fine-tuned attention maps
    over a `tokens` frame; returns the rows and the seconds taken. `batch_tokens` defaults by device;
    a pass that runs out of device memory starts again at half of it (logged), down to the longest
    example (then PassOutOfMemory); an example's cosines do not depend on its batch."""
    check_comparable(base, tuned)
    started = time.perf_counter()
    backoff = BackOff(
        "Fine-tuning similarity",
        "padded positions per batch (batch_tokens)",
        "Lower max_examples or the corpus's max_len, set ATTN_DTYPE=bfloat16, or run on a device with more "
        "memory (ATTN_DEVICE). Nothing was written.",
        base.compute.device,
        smallest=int(tokens.group_by("example_id").len()["len"].max() or 1),
    )
    parts = backoff.retrying(
        lambda budget: _cosine_parts(base, tuned, tokens, budget, progress),
        batch_tokens or base.compute.batch_tokens(),
    )
    return frame(parts), time.perf_counter() - started


def _cosine_parts(
    base: LoadedEncoder,
    tuned: LoadedEncoder,
    tokens: pl.DataFrame,
    batch_tokens: int,
    progress: Callable[[int, int, float], None] | None,
) -> list[dict[str, np.ndarray]]:
    """One pass at `batch_tokens`: each batch's cosine columns."""
    started = time.perf_counter()
    total = tokens["example_id"].n_unique()
    parts: list[dict[str, np.ndarray]] = []
    done = 0
    with torch.inference_mode():
        for batch in length_batches(
            tokens, base.tokenizer.pad_token_id or 0, batch_tokens, base.spec.takes_token_types
        ):
            batch = batch.to(base.compute.device)
            maps = [
                float32_maps(encoder.model(**batch.inputs, output_attentions=True).attentions)
                for encoder in (base, tuned)
            ]
            parts.append(head_columns({"cosine": map_cosine(*maps, batch.masks.valid)}, batch.example_ids))
            done += len(batch.example_ids)
            if progress:
                progress(done, total, time.perf_counter() - started)
    return parts


@dataclass(frozen=True)
class FinetuneSimilarity:
    """Fig. 5 for one base model and its fine-tuned model on a task's validation examples."""

    cosines: pl.DataFrame  # `finetune_cosines` rows: one per (example, layer, head)
    per_layer: pl.DataFrame  # (layer, cosine): the mean cosine of each layer
    n_examples: int
    n_layer_heads: int  # layers x heads of the base model: the rows of each example
    seconds: float


def finetune_similarity(
    source: str,
    tuned_source: str,
    tuned_model_id: str,
    tokens: pl.DataFrame,
    *,
    max_examples: int,
    batch_tokens: int | None,
    compute: ComputeDevice,
    progress: Callable[[int, int, float], None],
) -> FinetuneSimilarity:
    """The base model `source` and its fine-tuned model `tuned_source` (partition `tuned_model_id`),
    both loaded on `compute`, compared over the first `max_examples` examples (by example_id) of the
    base model's `tokens`; see extract_finetune_cosines."""
    tokens = first_examples(tokens, max_examples)
    base = load_encoder(source, compute)
    cosines, seconds = extract_finetune_cosines(
        base, load_encoder(tuned_source, compute), tokens, batch_tokens, progress
    )
    cosines = cosines.with_columns(tuned_model_id=pl.lit(tuned_model_id))
    per_layer = cosines.group_by("layer").agg(pl.col("cosine").mean()).sort("layer")
    return FinetuneSimilarity(
        cosines, per_layer, tokens["example_id"].n_unique(), base.spec.n_layers * base.spec.n_heads, seconds
    )
