"""Kovaleva §4.3, Fig. 5: how far fine-tuning moved each head's attention.

The base and the fine-tuned encoder read the same validation batches (two forward passes
by necessity, both streamed); per (example, layer, head) the cosine of the two cropped
n x n maps is kept, nothing n x n is stored. Both run on the base encoder's device and dtype
(load both alike); the cosines are taken in float32.
"""

import time
from collections.abc import Callable

import numpy as np
import polars as pl
import torch

from dagster_project.compute.batching import frame, head_columns, length_batches
from dagster_project.compute.devices import float32_maps
from dagster_project.compute.metrics import map_cosine
from dagster_project.compute.models import LoadedEncoder


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
    over a `tokens` frame; returns the rows and the seconds taken. `batch_tokens` defaults by device."""
    check_comparable(base, tuned)
    started = time.perf_counter()
    total = tokens["example_id"].n_unique()
    parts: list[dict[str, np.ndarray]] = []
    done = 0
    with torch.inference_mode():
        for batch in length_batches(
            tokens,
            base.tokenizer.pad_token_id or 0,
            batch_tokens or base.compute.batch_tokens(),
            base.spec.takes_token_types,
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
    return frame(parts), time.perf_counter() - started
