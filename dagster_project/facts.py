"""One forward pass per (model, corpus) -> every per-example attention fact of METHODS §3.

Examples are batched by length (a token budget per batch) so padding stays small; the
statistics of `metrics` run on the whole batch x layer x head block at once.
"""

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import polars as pl
import torch

from dagster_project.head_clustering import head_js_divergence
from dagster_project.metrics import (
    TokenMasks,
    head_summaries,
    most_attended_words,
    pair_mask,
    relative_position_histogram,
    word_level_maps,
    word_piece_matrix,
)
from dagster_project.models import LoadedEncoder

SCOPES = ("all", "content")
SCOPE = pl.Enum(SCOPES)
KIND = pl.Enum(["attention", "contribution"])  # contribution: HTA input contribution
DEFAULT_BATCH_TOKENS = 4096


@dataclass(frozen=True)
class Batch:
    example_ids: torch.Tensor  # (B,)
    inputs: dict[str, torch.Tensor]  # model inputs, (B, T) each
    masks: TokenMasks
    # (B, W, 2) piece span [start, end) of each corpus word, by word_index; start == end
    # for padded slots and words without pieces. Present when words were given.
    word_spans: torch.Tensor | None = None


@dataclass(frozen=True)
class AttentionFacts:
    head_summaries: pl.DataFrame
    position_histograms: pl.DataFrame
    relation_hits: pl.DataFrame
    head_distances: pl.DataFrame
    n_examples: int
    seconds: float


_CLASS_CODES = {"cls": 1, "sep": 2, "punct": 3}
_PAD_CODE = -1


def length_batches(
    tokens: pl.DataFrame, pad_token_id: int, batch_tokens: int, with_token_types: bool, words: pl.DataFrame | None = None
) -> Iterator[Batch]:
    """Padded batches of similar-length examples from a `tokens` frame (one row per token).

    A batch holds as many examples as fit in `batch_tokens` padded positions. With a
    `words` frame (the warehouse table's example_id, word_index, piece_start, piece_end),
    each batch also carries its examples' word spans.
    """
    per_example = (
        tokens.sort("example_id", "position")
        .with_columns(class_code=pl.col("token_class").replace_strict(_CLASS_CODES, default=0, return_dtype=pl.Int8))
        .group_by("example_id", maintain_order=True)
        .agg("token_id", "segment", "class_code", n=pl.len())
        .sort("n", "example_id")
    )
    if words is not None:
        spans = words.group_by("example_id").agg(
            "word_index", pl.col("piece_start").fill_null(0), pl.col("piece_end").fill_null(0)
        )
        per_example = per_example.join(spans, on="example_id", how="left", maintain_order="left")
    lengths = per_example["n"].to_numpy()
    start = 0
    while start < per_example.height:
        # Sorted by length, so the last example of a batch sets its width.
        stop = start + 1
        while stop < per_example.height and (stop - start + 1) * lengths[stop] <= batch_tokens:
            stop += 1
        yield _pad(per_example[start:stop], pad_token_id, with_token_types)
        start = stop


def _pad(chunk: pl.DataFrame, pad_token_id: int, with_token_types: bool) -> Batch:
    def padded(column: str, fill: int) -> torch.Tensor:
        rows = [torch.tensor(values) for values in chunk[column].to_list()]
        return torch.nn.utils.rnn.pad_sequence(rows, batch_first=True, padding_value=fill)

    codes = padded("class_code", _PAD_CODE)
    valid = codes != _PAD_CODE
    segments = padded("segment", 0).to(torch.int64)
    inputs = {"input_ids": padded("token_id", pad_token_id), "attention_mask": valid.to(torch.int64)}
    if with_token_types:
        inputs["token_type_ids"] = segments
    masks = TokenMasks(
        valid=valid,
        cls=codes == _CLASS_CODES["cls"],
        sep=codes == _CLASS_CODES["sep"],
        punct=codes == _CLASS_CODES["punct"],
        segment=segments,
    )
    word_spans = _word_spans(chunk) if "word_index" in chunk.columns else None
    return Batch(example_ids=torch.tensor(chunk["example_id"].to_numpy()), inputs=inputs, masks=masks, word_spans=word_spans)


def _word_spans(chunk: pl.DataFrame) -> torch.Tensor:
    """(B, W, 2) piece spans placed at each word's index (examples without words: none)."""
    indexes = [value or [] for value in chunk["word_index"].to_list()]
    width = max((max(index) + 1 for index in indexes if index), default=0)
    spans = torch.zeros(len(indexes), width, 2, dtype=torch.int64)
    for row, (index, starts, ends) in enumerate(zip(indexes, chunk["piece_start"].to_list(), chunk["piece_end"].to_list())):
        if index:
            spans[row, index] = torch.tensor([starts, ends]).T
    return spans


def _grid(batch_size: int, n_layers: int, n_heads: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Broadcastable (B, L, H) index tensors: example row, 1-based layer, 1-based head."""
    rows = torch.arange(batch_size)[:, None, None]
    layers = torch.arange(1, n_layers + 1, dtype=torch.int16)[None, :, None]
    heads = torch.arange(1, n_heads + 1, dtype=torch.int16)[None, None, :]
    return rows, layers, heads


def head_columns(values: dict[str, torch.Tensor], example_ids: torch.Tensor) -> dict[str, np.ndarray]:
    """Flat (example, layer, head) rows from (B, L, H) tensors of per-head values."""
    shape = next(iter(values.values())).shape
    rows, layers, heads = _grid(*shape)
    return _flat(
        {"example_id": example_ids[rows].expand(shape), "layer": layers.expand(shape), "head": heads.expand(shape), **values}
    )


def histogram_columns(maps: torch.Tensor, masks: TokenMasks, example_ids: torch.Tensor) -> dict[str, dict[str, np.ndarray]]:
    """Per scope, the relative-position (sum, count) rows of (B, L, H, T, T) maps."""
    width = maps.shape[-1]
    scoped = {}
    for scope, tokens in zip(SCOPES, (masks.valid, masks.content)):
        sums, counts = relative_position_histogram(maps, pair_mask(tokens, tokens))
        # Offsets no (query, key) pair reaches (beyond the example's length) are not facts.
        b, layer, head, offset = (counts[:, None, None, :] > 0).expand_as(sums).nonzero(as_tuple=True)
        scoped[scope] = _flat(
            {
                "example_id": example_ids[b],
                "layer": (layer + 1).to(torch.int16),
                "head": (head + 1).to(torch.int16),
                "offset": (offset - (width - 1)).to(torch.int16),
                "weight_sum": sums[b, layer, head, offset],
                "pair_count": counts[b, offset].to(torch.int32),
            }
        )
    return scoped


def relation_hit_columns(attn: torch.Tensor, word_spans: torch.Tensor, example_ids: torch.Tensor, word_mode: str) -> dict[str, np.ndarray]:
    """Per (example, word with pieces, layer, head) the most-attended other word of the
    word-level map (METHODS §3 relation hits), as flat columns."""
    membership = word_piece_matrix(word_spans[..., 0], word_spans[..., 1], attn.shape[-1])
    real = membership.sum(-1) > 0
    best = most_attended_words(word_level_maps(attn, membership, word_mode), real)
    b, layer, head, word = (real[:, None, None, :] & (best >= 0)).nonzero(as_tuple=True)
    return _flat(
        {
            "example_id": example_ids[b],
            "word_index": word.to(torch.int32),
            "layer": (layer + 1).to(torch.int16),
            "head": (head + 1).to(torch.int16),
            "target_word": best[b, layer, head, word].to(torch.int32),
        }
    )


def head_distance_frame(js_sums: torch.Tensor, n_tokens: int, n_heads: int) -> pl.DataFrame:
    """Rows (layer_a, head_a, layer_b, head_b, js_sum, tokens) of a (K, K) matrix of summed
    Jensen-Shannon divergences, head index k = layer * n_heads + head (0-based)."""
    first, second = torch.meshgrid(torch.arange(js_sums.shape[0]), torch.arange(js_sums.shape[0]), indexing="ij")
    return pl.DataFrame(
        _flat(
            {
                "layer_a": (first // n_heads + 1).to(torch.int16),
                "head_a": (first % n_heads + 1).to(torch.int16),
                "layer_b": (second // n_heads + 1).to(torch.int16),
                "head_b": (second % n_heads + 1).to(torch.int16),
                "js_sum": js_sums,
            }
        )
    ).with_columns(tokens=pl.lit(n_tokens, dtype=pl.Int64))


def batch_facts(
    attn: torch.Tensor, batch: Batch, histograms: bool = True
) -> tuple[dict[str, np.ndarray], dict[str, dict[str, np.ndarray]]]:
    """Head summaries and, per scope, relative-position histograms of one batch, as flat columns."""
    masks = batch.masks
    n_tokens = masks.valid.sum(-1).to(torch.int16)[:, None, None].expand(attn.shape[:3])
    summaries = head_columns({"n_tokens": n_tokens, **head_summaries(attn, masks)}, batch.example_ids)
    return summaries, histogram_columns(attn, masks, batch.example_ids) if histograms else {}


def _flat(columns: dict[str, torch.Tensor]) -> dict[str, np.ndarray]:
    return {name: value.reshape(-1).numpy() for name, value in columns.items()}


def frame(parts: list[dict[str, np.ndarray]]) -> pl.DataFrame:
    """One frame from the flat column dicts of several batches."""
    return pl.DataFrame({name: np.concatenate([part[name] for part in parts]) for name in parts[0]})


def histogram_frame(parts: dict[str, list[dict[str, np.ndarray]]], kind: str) -> pl.DataFrame:
    """The histogram rows of several batches, labelled with their kind and scope."""
    return pl.concat(
        frame(scope_parts).with_columns(kind=pl.lit(kind, dtype=KIND), scope=pl.lit(scope, dtype=SCOPE))
        for scope, scope_parts in parts.items()
    )


def extract_attention_facts(
    encoder: LoadedEncoder,
    tokens: pl.DataFrame,
    batch_tokens: int = DEFAULT_BATCH_TOKENS,
    progress: Callable[[int, int, float], None] | None = None,
    histograms: bool = True,
    words: pl.DataFrame | None = None,
    word_mode: str = "mean",
    head_distances: bool = False,
) -> AttentionFacts:
    """Run the model once over a tokenized corpus and compute every attention fact.

    `tokens` has the columns of the warehouse `tokens` table for one (model, corpus).
    `progress(done, total, seconds)` is called after each batch. Without `histograms`,
    position_histograms comes back empty (corpora analysed per word, not per offset).
    With `words` (the `words` table's rows), relation hits are computed in `word_mode`.
    With `head_distances`, the Jensen-Shannon divergence of every pair of heads is summed
    over the corpus's query tokens (Clark §6).
    """
    started = time.perf_counter()
    total = tokens["example_id"].n_unique()
    summary_parts: list[dict[str, np.ndarray]] = []
    histogram_parts: dict[str, list[dict[str, np.ndarray]]] = {scope: [] for scope in SCOPES}
    hit_parts: list[dict[str, np.ndarray]] = []
    n_heads = encoder.spec.n_layers * encoder.spec.n_heads
    js_sums, js_tokens = torch.zeros(n_heads, n_heads, dtype=torch.float64), 0
    done = 0
    batches = length_batches(
        tokens, encoder.tokenizer.pad_token_id or 0, batch_tokens, encoder.spec.takes_token_types, words
    )
    with torch.inference_mode():
        for batch in batches:
            attentions = encoder.model(**batch.inputs, output_attentions=True).attentions
            attn = torch.stack(attentions, dim=1)
            summaries, scoped = batch_facts(attn, batch, histograms)
            summary_parts.append(summaries)
            for scope, columns in scoped.items():
                histogram_parts[scope].append(columns)
            if batch.word_spans is not None:
                hit_parts.append(relation_hit_columns(attn, batch.word_spans, batch.example_ids, word_mode))
            if head_distances:
                js_sums += head_js_divergence(attn, batch.masks.valid)
                js_tokens += int(batch.masks.valid.sum())
            done += len(batch.example_ids)
            if progress:
                progress(done, total, time.perf_counter() - started)
    return AttentionFacts(
        head_summaries=frame(summary_parts),
        position_histograms=histogram_frame(histogram_parts, "attention") if histograms else pl.DataFrame(),
        relation_hits=frame(hit_parts).with_columns(word_mode=pl.lit(word_mode)) if hit_parts else pl.DataFrame(),
        head_distances=head_distance_frame(js_sums, js_tokens, encoder.spec.n_heads) if head_distances else pl.DataFrame(),
        n_examples=done,
        seconds=time.perf_counter() - started,
    )
