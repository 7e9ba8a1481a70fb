"""One forward pass per (model, corpus) -> every per-example attention fact of METHODS §3.

Examples are batched by length (a token budget per batch) so padding stays small; the
statistics of `metrics` run on the whole batch x layer x head block at once.
"""

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np
import polars as pl
import torch

from dagster_project.compute.head_clustering import distance_rows, head_js_divergence
from dagster_project.compute.metrics import (
    PATTERNS,
    PatternThresholds,
    TokenMasks,
    head_summaries,
    most_attended_words,
    pair_mask,
    pattern_classes,
    received_attention,
    relative_position_histogram,
    segment_block_mass,
    span_pair_max,
    word_level_maps,
    word_pair_attention,
    word_piece_matrix,
)
from dagster_project.compute.models import LoadedEncoder

SCOPES = ("all", "content")
SCOPE = pl.Enum(SCOPES)
KIND = pl.Enum(["attention", "contribution"])  # contribution: HTA input contribution
DEFAULT_BATCH_TOKENS = 4096
# spaCy flags of `word_features` (Kovaleva §4.4) and the token-to-token pairs of §4.5:
# attention from a word of the first kind to a word of the second, in the same segment.
WORD_FEATURES = ("is_noun", "is_verb", "is_pronoun", "is_subject", "is_object", "is_negation")
FEATURE_PAIRS = {"verb_subject": ("is_verb", "is_subject"), "noun_pronoun": ("is_noun", "is_pronoun")}
FRAME_LINK_COLUMNS = ("target_start", "target_end", "element_start", "element_end")


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


@dataclass(frozen=True)
class AttentionFacts:
    head_summaries: pl.DataFrame
    position_histograms: pl.DataFrame
    relation_hits: pl.DataFrame
    head_distances: pl.DataFrame
    n_examples: int
    seconds: float
    received_attention: pl.DataFrame = field(default_factory=pl.DataFrame)
    feature_pair_attention: pl.DataFrame = field(default_factory=pl.DataFrame)
    frame_link_attention: pl.DataFrame = field(default_factory=pl.DataFrame)
    pattern_example_maps: pl.DataFrame = field(default_factory=pl.DataFrame)


_CLASS_CODES = {"cls": 1, "sep": 2, "punct": 3}
_PAD_CODE = -1


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
    word_spans = (
        _by_word_index(chunk, ["piece_start", "piece_end"], torch.int64) if "word_index" in chunk.columns else None
    )
    word_features = (
        _by_word_index(chunk, list(WORD_FEATURES), torch.bool) if WORD_FEATURES[0] in chunk.columns else None
    )
    return Batch(
        example_ids=torch.tensor(chunk["example_id"].to_numpy()),
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
    placed = torch.zeros(len(indexes), width, len(columns), dtype=dtype)
    for row, (index, *values) in enumerate(zip(indexes, *(chunk[column].to_list() for column in columns))):
        if index:
            placed[row, index] = torch.tensor(values, dtype=dtype).T
    return placed


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
        {
            "example_id": example_ids[rows].expand(shape),
            "layer": layers.expand(shape),
            "head": heads.expand(shape),
            **values,
        }
    )


def histogram_columns(
    maps: torch.Tensor, masks: TokenMasks, example_ids: torch.Tensor
) -> dict[str, dict[str, np.ndarray]]:
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


def relation_hit_columns(
    attn: torch.Tensor, word_spans: torch.Tensor, example_ids: torch.Tensor, word_mode: str
) -> dict[str, np.ndarray]:
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


def batch_facts(
    attn: torch.Tensor, batch: Batch, histograms: bool = True, thresholds: PatternThresholds = PatternThresholds()
) -> tuple[dict[str, np.ndarray], dict[str, dict[str, np.ndarray]]]:
    """Head summaries (with the Kovaleva pattern class, an index into PATTERNS, by the
    rules of `pattern_classes`) and, per scope, relative-position histograms of one batch,
    as flat columns."""
    masks = batch.masks
    n_tokens = masks.valid.sum(-1).to(torch.int16)[:, None, None].expand(attn.shape[:3])
    values = head_summaries(attn, masks)
    pattern = pattern_classes(values, segment_block_mass(attn, masks), masks, thresholds).to(torch.int8)
    summaries = head_columns({"n_tokens": n_tokens, **values, "pattern": pattern}, batch.example_ids)
    return summaries, histogram_columns(attn, masks, batch.example_ids) if histograms else {}


def received_attention_columns(attn: torch.Tensor, batch: Batch) -> dict[str, np.ndarray]:
    """Per (example, real token, layer, head) received attention and the [CLS] row's weight."""
    received, from_cls = received_attention(attn, batch.masks)
    b, layer, head, position = batch.masks.valid[:, None, None, :].expand_as(received).nonzero(as_tuple=True)
    return _flat(
        {
            "example_id": batch.example_ids[b],
            "position": position.to(torch.int16),
            "layer": (layer + 1).to(torch.int16),
            "head": (head + 1).to(torch.int16),
            "received": received[b, layer, head, position],
            "from_cls": from_cls[b, layer, head, position],
        }
    )


def feature_pair_columns(attn: torch.Tensor, batch: Batch) -> list[dict[str, np.ndarray]]:
    """Per FEATURE_PAIRS pair and (example with such pairs, layer, head): mean word-level
    attention (`mean` mode) over every (first kind, second kind) pair of distinct words of
    one segment, and the number of pairs."""
    spans, flags = batch.word_spans, batch.word_features
    membership = word_piece_matrix(spans[..., 0], spans[..., 1], attn.shape[-1])
    real = membership.sum(-1) > 0
    segment = batch.masks.segment.gather(1, spans[..., 0].clamp(max=attn.shape[-1] - 1))
    allowed = (
        pair_mask(real, real)
        & (segment[:, :, None] == segment[:, None, :])
        & ~torch.eye(real.shape[1], dtype=torch.bool)
    )
    word_maps = word_level_maps(attn, membership, "mean")
    parts = []
    for pair, (source, target) in FEATURE_PAIRS.items():
        pairs = allowed & pair_mask(flags[..., WORD_FEATURES.index(source)], flags[..., WORD_FEATURES.index(target)])
        means, counts = word_pair_attention(word_maps, pairs)
        b, layer, head = (counts > 0)[:, None, None].expand_as(means).nonzero(as_tuple=True)
        columns = _flat(
            {
                "example_id": batch.example_ids[b],
                "layer": (layer + 1).to(torch.int16),
                "head": (head + 1).to(torch.int16),
                "attention": means[b, layer, head],
                "pairs": counts[b].to(torch.int32),
            }
        )
        parts.append({**columns, "pair": np.full(len(b), pair)})
    return parts


def frame_link_columns(attn: torch.Tensor, batch: Batch, links: pl.DataFrame) -> dict[str, np.ndarray] | None:
    """Per (frame link of the batch's examples, layer, head) the largest attention between
    the pieces of the lexical unit and those of the frame element, both directions.

    links: example_id and FRAME_LINK_COLUMNS ([start, end) word spans); None if the batch has none."""
    rows = pl.DataFrame({"example_id": batch.example_ids.numpy(), "row": np.arange(len(batch.example_ids))})
    links = links.join(rows, on="example_id", maintain_order="left")
    if links.height == 0:
        return None
    spans = batch.word_spans
    membership = word_piece_matrix(spans[..., 0], spans[..., 1], attn.shape[-1])
    row = torch.tensor(links["row"].to_numpy())
    words = torch.arange(spans.shape[1])
    bounds = {name: torch.tensor(links[name].to_numpy())[:, None] for name in FRAME_LINK_COLUMNS}

    def pieces(start: torch.Tensor, end: torch.Tensor) -> torch.Tensor:
        in_span = ((words >= start) & (words < end)).to(membership.dtype)
        return torch.einsum("kw,kwt->kt", in_span, membership[row]) > 0

    best = span_pair_max(
        attn[row],
        pieces(bounds["target_start"], bounds["target_end"]),
        pieces(bounds["element_start"], bounds["element_end"]),
    )
    k, layer, head = torch.ones_like(best, dtype=torch.bool).nonzero(as_tuple=True)
    return _flat(
        {
            "example_id": batch.example_ids[row[k]],
            **{name: value[k, 0].to(torch.int32) for name, value in bounds.items()},
            "layer": (layer + 1).to(torch.int16),
            "head": (head + 1).to(torch.int16),
            "max_attention": best[k, layer, head],
        }
    )


def pick_pattern_examples(
    attn: torch.Tensor, batch: Batch, patterns: torch.Tensor, picked: dict[str, list[pl.DataFrame]], per_pattern: int
) -> None:
    """Add to `picked` (pattern -> cropped maps) up to `per_pattern` maps per class, each
    from a different example: the first head of that class of the batch's first examples
    that have one (batches come shortest first, so the maps stay small)."""
    n_tokens = batch.masks.valid.sum(-1)
    for index, pattern in enumerate(PATTERNS):
        chosen = picked.setdefault(pattern, [])
        taken = {int(part["example_id"][0]) for part in chosen}
        is_class = patterns == index
        for b in is_class.any((1, 2)).nonzero()[:, 0].tolist():
            if len(chosen) >= per_pattern:
                break
            if int(batch.example_ids[b]) in taken:
                continue
            layer, head = is_class[b].nonzero()[0].tolist()
            n = int(n_tokens[b])
            cells = attn[b, layer, head, :n, :n]
            query, key = torch.meshgrid(
                torch.arange(n, dtype=torch.int16), torch.arange(n, dtype=torch.int16), indexing="ij"
            )
            chosen.append(
                pl.DataFrame(
                    {
                        "example_id": np.full(n * n, int(batch.example_ids[b]), dtype=np.int32),
                        "pattern": pattern,
                        "layer": np.full(n * n, layer + 1, dtype=np.int16),
                        "head": np.full(n * n, head + 1, dtype=np.int16),
                        "query": query.reshape(-1).numpy(),
                        "key": key.reshape(-1).numpy(),
                        "attention": cells.reshape(-1).numpy(),
                    }
                )
            )


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
    relation_hits: bool = True,
    received: bool = False,
    frame_links: pl.DataFrame | None = None,
    pattern_examples: int = 0,
    thresholds: PatternThresholds = PatternThresholds(),
) -> AttentionFacts:
    """Run the model once over a tokenized corpus and compute every attention fact.

    `tokens` has the columns of the warehouse `tokens` table for one (model, corpus).
    `progress(done, total, seconds)` is called after each batch. Without `histograms`,
    position_histograms comes back empty (corpora analysed per word, not per offset).
    With `words` (the `words` table's rows) and `relation_hits`, relation hits are computed in `word_mode`.
    With `head_distances`, the Jensen-Shannon divergence of every pair of heads is summed
    over the corpus's query tokens (Clark §6).
    Kovaleva: every head summary gets its pattern class (`thresholds`); with `received`,
    received attention per token (§4.4) and, when `words` carry WORD_FEATURES, the
    token-to-token FEATURE_PAIRS attention (§4.5); with `frame_links` (needs `words`), the
    largest attention of every link (§4.2); with `pattern_examples` = k, the cropped maps
    of k examples per pattern class.
    """
    started = time.perf_counter()
    total = tokens["example_id"].n_unique()
    summary_parts: list[dict[str, np.ndarray]] = []
    histogram_parts: dict[str, list[dict[str, np.ndarray]]] = {scope: [] for scope in SCOPES}
    hit_parts: list[dict[str, np.ndarray]] = []
    received_parts: list[dict[str, np.ndarray]] = []
    pair_parts: list[dict[str, np.ndarray]] = []
    link_parts: list[dict[str, np.ndarray]] = []
    picked: dict[str, list[pl.DataFrame]] = {}
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
            summaries, scoped = batch_facts(attn, batch, histograms, thresholds)
            summary_parts.append(summaries)
            for scope, columns in scoped.items():
                histogram_parts[scope].append(columns)
            if batch.word_spans is not None and relation_hits:
                hit_parts.append(relation_hit_columns(attn, batch.word_spans, batch.example_ids, word_mode))
            if received:
                received_parts.append(received_attention_columns(attn, batch))
                if batch.word_features is not None:
                    pair_parts.extend(feature_pair_columns(attn, batch))
            if frame_links is not None:
                links = frame_link_columns(attn, batch, frame_links)
                if links is not None:
                    link_parts.append(links)
            if pattern_examples:
                pick_pattern_examples(
                    attn,
                    batch,
                    torch.from_numpy(summaries["pattern"]).reshape(attn.shape[:3]),
                    picked,
                    pattern_examples,
                )
            if head_distances:
                js_sums += head_js_divergence(attn, batch.masks.valid)
                js_tokens += int(batch.masks.valid.sum())
            done += len(batch.example_ids)
            if progress:
                progress(done, total, time.perf_counter() - started)
    return AttentionFacts(
        head_summaries=frame(summary_parts).with_columns(
            pattern=pl.col("pattern").replace_strict(dict(enumerate(PATTERNS)), return_dtype=pl.String)
        ),
        position_histograms=histogram_frame(histogram_parts, "attention") if histograms else pl.DataFrame(),
        relation_hits=frame(hit_parts).with_columns(word_mode=pl.lit(word_mode)) if hit_parts else pl.DataFrame(),
        head_distances=distance_rows(js_sums, js_tokens, encoder.spec.n_heads) if head_distances else pl.DataFrame(),
        n_examples=done,
        seconds=time.perf_counter() - started,
        received_attention=frame(received_parts) if received_parts else pl.DataFrame(),
        feature_pair_attention=frame(pair_parts) if pair_parts else pl.DataFrame(),
        frame_link_attention=frame(link_parts) if link_parts else pl.DataFrame(),
        pattern_example_maps=pl.concat(part for parts in picked.values() for part in parts)
        if any(picked.values())
        else pl.DataFrame(),
    )
