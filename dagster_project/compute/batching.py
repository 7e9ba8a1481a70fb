"""Length-bucketed batches of a tokenized corpus, and the flat-column helpers every pass
uses to turn (batch, layer, head, ...) tensors into warehouse rows.

Examples are batched by length (a token budget per batch) so padding stays small. Batches are
built on the CPU and moved to the pass's device (`Batch.to`); rows come back to the CPU (`flat`).
"""

from collections.abc import Iterator
from dataclasses import dataclass, fields, replace

import numpy as np
import polars as pl
import torch

from dagster_project.compute.devices import to_host
from dagster_project.compute.metrics import TokenMasks, nested_position_histograms, pair_mask
from dagster_project.compute.pass_timings import phase

SCOPES = ("all", "content")
SCOPE = pl.Enum(SCOPES)
BUILT_ON = torch.device("cpu")  # batches are built here, then moved to the pass's device (Batch.to)
# spaCy flags of `word_features` (Kovaleva §4.4), carried per word in a batch.
WORD_FEATURES = ("is_noun", "is_verb", "is_pronoun", "is_subject", "is_object", "is_negation")


@dataclass(frozen=True)
class Batch:
    example_ids: torch.Tensor  # (B,)
    inputs: dict[str, torch.Tensor]  # model inputs, (B, T) each
    masks: TokenMasks
    # (B, W, 2) piece span [start, end) of each corpus word, by word_index; start == end
    # for padded slots and words without pieces. Present when words were given.
    word_spans: torch.Tensor | None = None
    # (B, W, len(WORD_FEATURES)) spaCy flags by word_index; present when words carried them.
    word_features: torch.Tensor | None = None

    def to(self, device: torch.device) -> "Batch":
        """The batch with every tensor on `device` (itself when they are there already)."""
        if self.example_ids.device == device:
            return self

        def move(value: torch.Tensor | None) -> torch.Tensor | None:
            return None if value is None else value.to(device)

        return replace(
            self,
            example_ids=move(self.example_ids),
            inputs={name: move(value) for name, value in self.inputs.items()},
            masks=replace(
                self.masks, **{field.name: move(getattr(self.masks, field.name)) for field in fields(self.masks)}
            ),
            word_spans=move(self.word_spans),
            word_features=move(self.word_features),
        )


_CLASS_CODES = {"cls": 1, "sep": 2, "punct": 3}
_PAD_CODE = -1


def first_examples(tokens: pl.DataFrame, max_examples: int | None) -> pl.DataFrame:
    """The rows of the first `max_examples` examples of `tokens` by example_id (None: all of them)."""
    if not max_examples:
        return tokens
    keep = tokens["example_id"].unique().sort()[:max_examples]
    return tokens.filter(pl.col("example_id").is_in(keep.implode()))


def length_batches(
    tokens: pl.DataFrame,
    pad_token_id: int,
    batch_tokens: int,
    with_token_types: bool,
    words: pl.DataFrame | None = None,
) -> Iterator[Batch]:
    """Padded batches of similar-length examples from a `tokens` frame (one row per token).

    A batch holds as many examples as fit in `batch_tokens` padded positions. With a
    `words` frame (the warehouse table's example_id, word_index, piece_start, piece_end),
    each batch also carries its examples' word spans, and with its WORD_FEATURES columns
    (joined from `word_features`) their spaCy flags.
    """
    per_example = (
        tokens.sort("example_id", "position")
        .with_columns(class_code=pl.col("token_class").replace_strict(_CLASS_CODES, default=0, return_dtype=pl.Int8))
        .group_by("example_id", maintain_order=True)
        .agg("token_id", "segment", "class_code", n=pl.len())
        .sort("n", "example_id")
    )
    if words is not None:
        flags = [pl.col(name).fill_null(False) for name in WORD_FEATURES if name in words.columns]
        spans = words.group_by("example_id").agg(
            "word_index", pl.col("piece_start").fill_null(0), pl.col("piece_end").fill_null(0), *flags
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
        rows = [torch.tensor(values, device=BUILT_ON) for values in chunk[column].to_list()]
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
    word_spans = (
        _by_word_index(chunk, ["piece_start", "piece_end"], torch.int64) if "word_index" in chunk.columns else None
    )
    word_features = (
        _by_word_index(chunk, list(WORD_FEATURES), torch.bool) if WORD_FEATURES[0] in chunk.columns else None
    )
    return Batch(
        example_ids=torch.tensor(chunk["example_id"].to_numpy(), device=BUILT_ON),
        inputs=inputs,
        masks=masks,
        word_spans=word_spans,
        word_features=word_features,
    )


def _by_word_index(chunk: pl.DataFrame, columns: list[str], dtype: torch.dtype) -> torch.Tensor:
    """(B, W, len(columns)) per-word list columns placed at each word's index (examples
    without words, and padded word slots: zeros)."""
    indexes = [value or [] for value in chunk["word_index"].to_list()]
    width = max((max(index) + 1 for index in indexes if index), default=0)
    placed = torch.zeros(len(indexes), width, len(columns), dtype=dtype, device=BUILT_ON)
    for row, (index, *values) in enumerate(zip(indexes, *(chunk[column].to_list() for column in columns))):
        if index:
            placed[row, index] = torch.tensor(values, dtype=dtype, device=BUILT_ON).T
    return placed


def head_grid(
    batch_size: int, n_layers: int, n_heads: int, device: torch.device, first_layer: int = 1
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Broadcastable (B, L, H) index tensors: example row, 1-based layer (the L layers from `first_layer`
    on), 1-based head."""
    rows = torch.arange(batch_size, device=device)[:, None, None]
    layers = torch.arange(first_layer, first_layer + n_layers, dtype=torch.int16, device=device)[None, :, None]
    heads = torch.arange(1, n_heads + 1, dtype=torch.int16, device=device)[None, None, :]
    return rows, layers, heads


def head_columns(
    values: dict[str, torch.Tensor], example_ids: torch.Tensor, first_layer: int = 1
) -> dict[str, np.ndarray]:
    """Flat (example, layer, head) rows from (B, L, H) tensors of per-head values of the L layers from
    `first_layer` on."""
    first = next(iter(values.values()))
    shape = first.shape
    rows, layers, heads = head_grid(*shape, first.device, first_layer)
    return flat(
        {
            "example_id": example_ids[rows].expand(shape),
            "layer": layers.expand(shape),
            "head": heads.expand(shape),
            **values,
        }
    )


def histogram_frame(
    maps: torch.Tensor, masks: TokenMasks, example_ids: torch.Tensor, first_layer: int = 1
) -> pl.DataFrame:
    """The relative-position histograms of (B, L, H, T, T) maps of the L layers from `first_layer` on in
    the warehouse's dense grain (sql/schema/position_histograms.sql): per scope and (example, layer, head)
    one row with 1 + sqrt(mean weight) at every offset -m..m, m the largest offset a pair of the scope
    reaches in the example, and on the row of layer 1, head 1 the pair counts at those offsets (null on
    the others: they are the same for every head). Examples without a pair in the scope have no row."""
    return dense_histograms(histogram_columns(maps, masks, example_ids, first_layer))


def histogram_columns(
    maps: torch.Tensor, masks: TokenMasks, example_ids: torch.Tensor, first_layer: int = 1
) -> dict[str, dict[str, np.ndarray]]:
    """histogram_frame's sums on the maps' device, per scope as flat columns on the host (dense_histograms
    makes the frame of them)."""
    batch_size, n_layers, n_heads, width = maps.shape[:4]
    distance = torch.arange(1 - width, width, device=maps.device).abs()
    rows, layers, heads = head_grid(batch_size, n_layers, n_heads, maps.device, first_layer)
    scopes = {}
    # the content tokens are real ones: both scopes from one pass over the maps
    histograms = nested_position_histograms(
        maps, pair_mask(masks.valid, masks.valid), pair_mask(masks.content, masks.content)
    )
    for scope, (sums, counts) in zip(SCOPES, histograms, strict=True):
        reach = torch.where(counts > 0, distance, -1).amax(-1)  # (B,): -1 when no pair is in scope
        offsets = distance <= reach[:, None]  # (B, 2T - 1): offsets -m..m of each example
        per_head = (reach >= 0)[:, None, None].expand(-1, n_layers, n_heads)
        # per example, not per head: on the rows of layer 1 alone
        pair_counts = counts[offsets] if first_layer == 1 else counts[:0, 0]
        scopes[scope] = flat(
            {
                "example_id": example_ids[rows].expand_as(per_head)[per_head],
                "layer": layers.expand_as(per_head)[per_head],
                "head": heads.expand_as(per_head)[per_head],
                "length": (2 * reach[:, None, None] + 1).expand_as(per_head)[per_head],
                "pair_counts": pair_counts.to(torch.int16),
                "repeated_counts": counts[:, None, None].expand_as(sums)[offsets[:, None, None].expand_as(sums)],
                "weight_sums": sums[offsets[:, None, None].expand_as(sums)],
            }
        )
    return scopes


def dense_histograms(scopes: dict[str, dict[str, np.ndarray]]) -> pl.DataFrame:
    """The frame of histogram_columns' columns (histogram_frame)."""
    parts = []
    for scope, columns in scopes.items():
        columns = dict(columns)
        pair_counts, repeated, weight_sums = (
            columns.pop(name) for name in ("pair_counts", "repeated_counts", "weight_sums")
        )
        # 1 + sqrt(mean) in float64, rounded once to float32's 2^-23 grid of [1, 2] (the schema's precision).
        means = np.divide(weight_sums.astype(np.float64), repeated, out=np.zeros(len(repeated)), where=repeated > 0)
        lengths = columns.pop("length")
        first_head = (columns["layer"] == 1) & (columns["head"] == 1)
        parts.append(
            pl.DataFrame(columns).with_columns(
                scope=pl.lit(scope, dtype=SCOPE),
                pair_counts=list_series(np.where(first_head, lengths, 0), pair_counts, null_rows=~first_head),
                one_plus_sqrt_mean_weights=list_series(lengths, (1.0 + np.sqrt(means)).astype(np.float32)),
            )
        )
    return pl.concat(parts).select("example_id", "scope", "layer", "head", "pair_counts", "one_plus_sqrt_mean_weights")


def list_series(
    lengths: np.ndarray, values: np.ndarray, null_rows: np.ndarray | None = None, null_value: int | None = None
) -> pl.Series:
    """A list column from its rows' lengths and their values laid end to end. null_rows: rows that are
    null; null_value: values that stand for a null element. Built in polars from a padded block (no
    per-row Python, no pyarrow: the compute layer runs where only torch, transformers and polars are)."""
    with phase("frames"):
        lengths = np.asarray(lengths, dtype=np.int64)
        width = int(lengths.max(initial=0))
        padded = np.zeros((len(lengths), max(width, 1)), dtype=values.dtype)
        padded[np.arange(padded.shape[1]) < lengths[:, None]] = values
        inner = pl.Series(values[:0]).dtype
        lists = pl.col("padded").cast(pl.List(inner)).list.head(pl.col("length"))
        if null_value is not None:
            lists = lists.list.eval(pl.when(pl.element() != null_value).then(pl.element()))
        if null_rows is not None:
            lists = pl.when(pl.col("null_row").not_()).then(lists)
        columns = {"padded": pl.Series(padded), "length": lengths}
        if null_rows is not None:
            columns["null_row"] = np.asarray(null_rows, dtype=bool)
        return pl.DataFrame(columns).select(lists.alias(""))[""]


def histogram_rows(histograms: pl.DataFrame, kind: str) -> pl.DataFrame:
    """Dense histogram rows (histogram_frame, or a warehouse table's) unpacked to the flat grain
    of stg_position_histograms: one row per offset a pair reaches, with weight_sum and pair_count
    (from the example's row that holds the counts), labelled with their `kind` (attention | contribution)."""
    counts = histograms.filter(pl.col("pair_counts").is_not_null()).select("example_id", "scope", "pair_counts")
    reach = (pl.col("one_plus_sqrt_mean_weights").list.len().cast(pl.Int32) - 1) // 2
    return (
        histograms.drop("pair_counts")
        .join(counts, on=["example_id", "scope"], maintain_order="left")
        .with_columns(offset=pl.int_ranges(-reach, reach + 1, dtype=pl.Int16))
        .explode("offset", "pair_counts", "one_plus_sqrt_mean_weights")
        .filter(pl.col("pair_counts") > 0)
        .with_columns(
            weight_sum=((pl.col("one_plus_sqrt_mean_weights").cast(pl.Float64) - 1) ** 2 * pl.col("pair_counts")).cast(
                pl.Float32
            ),
            pair_count=pl.col("pair_counts").cast(pl.Int32),
            kind=pl.lit(kind),
        )
        .drop("pair_counts", "one_plus_sqrt_mean_weights")
    )


def flat(columns: dict[str, torch.Tensor]) -> dict[str, np.ndarray]:
    """Flat numpy columns, brought back to the CPU from the pass's device in one wait."""
    with phase("copy"):
        moved = to_host({name: value.reshape(-1) for name, value in columns.items()})
    return {name: value.numpy() for name, value in moved.items()}


def frame(parts: list[dict[str, np.ndarray]]) -> pl.DataFrame:
    """One frame from the flat column dicts of several batches."""
    with phase("frames"):
        return pl.DataFrame({name: np.concatenate([part[name] for part in parts]) for name in parts[0]})
