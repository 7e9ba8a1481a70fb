"""Head correspondence between two models: match heads by behaviour on the same text.

Two models' heads are compared on word-level attention, which works across tokenizers: the
corpus's words are the same for both models (`words`), only their pieces differ. On each shared
example, every word that has pieces in both models is a query row: its attention to each shared
word (word_level_maps, `mean` mode: a word's row is the mean of its pieces' rows, attention to a
word the sum over its pieces) plus one `rest` column with the attention to everything else
(special tokens such as [CLS]/[SEP] or <s>/</s>, and pieces of words the other model lacks), so
each row is a probability distribution. The distance between head a of one model and head b of
the other is the Jensen-Shannon distance (scipy's `jensenshannon`, natural log: the square root
of the JS divergence, between 0 and sqrt(ln 2)) of their rows, averaged over every query row.
"""

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl
import torch

from dagster_project.compute.batching import length_batches
from dagster_project.compute.checks import CheckOutcome
from dagster_project.compute.devices import float32_maps
from dagster_project.compute.metrics import word_level_maps, word_piece_matrix
from dagster_project.compute.models import LoadedEncoder

# Bytes of one chunk's mixture tensor (rows x head pairs x columns): small enough for the cache.
MIXTURE_CHUNK_BYTES = 2**24
EXAMPLES_PER_CHUNK = 16  # examples whose word rows both models hold at once
MAX_JS_DISTANCE = float(np.sqrt(np.log(2)))  # of two distributions with disjoint support (natural log)


def js_distance_sums(p: torch.Tensor, q: torch.Tensor, chunk_bytes: int = MIXTURE_CHUNK_BYTES) -> torch.Tensor:
    """Sum over rows of the Jensen-Shannon distance (nats) between every head of `p` and every head of `q`.

    p: (R, A, K) and q: (R, B, K) rows that are probability distributions over the same K columns
    (row r of p and row r of q come from the same query word). Returns (A, B) float64: entry (a, b)
    is sum_r sqrt(JS(p[r, a], q[r, b])), JS = H(M) - (H(P) + H(Q)) / 2 with M = (P + Q) / 2.
    """
    if p.dim() != 3 or q.dim() != 3 or p.shape[0] != q.shape[0] or p.shape[2] != q.shape[2]:
        raise ValueError(
            f"js_distance_sums: p must be (R, A, K) and q (R, B, K) with the same R and K, "
            f"got {tuple(p.shape)} and {tuple(q.shape)}"
        )
    rows, heads_p, columns = p.shape
    heads_q = q.shape[1]
    sums = torch.zeros(heads_p, heads_q, dtype=torch.float64, device=p.device)
    entropy_p = torch.special.entr(p).sum(-1)  # (R, A)
    entropy_q = torch.special.entr(q).sum(-1)  # (R, B)
    per_chunk = max(1, chunk_bytes // (heads_p * heads_q * columns * p.element_size()))
    for start in range(0, rows, per_chunk):
        chunk = slice(start, start + per_chunk)
        mixture = (p[chunk, :, None, :] + q[chunk, None, :, :]) * 0.5  # (r, A, B, K)
        divergence = torch.special.entr(mixture).sum(-1) - 0.5 * (entropy_p[chunk, :, None] + entropy_q[chunk, None, :])
        sums += divergence.clamp_min(0.0).sqrt().sum(0, dtype=torch.float64)
    return sums


def word_distributions(attn: torch.Tensor, word_spans: torch.Tensor) -> torch.Tensor:
    """(B, L, H, T, T) maps -> (B, L*H, W, W + 1) word-level rows with the `rest` column last.

    word_spans: (B, W, 2) piece spans [start, end) of the words compared (others: start == end).
    A row is the word's mean piece row over the words' pieces, then 1 - its sum (the attention to
    every other token); rows of words without pieces are all zero but for rest = 1.
    """
    membership = word_piece_matrix(word_spans[..., 0], word_spans[..., 1], attn.shape[-1])
    maps = word_level_maps(attn, membership, "mean")
    rest = (1.0 - maps.sum(-1, keepdim=True)).clamp_min(0.0)
    rows = torch.cat([maps, rest], -1)
    batch, layers, heads, words, columns = rows.shape
    return rows.reshape(batch, layers * heads, words, columns)


@dataclass(frozen=True)
class MatchSide:
    """One model's side of a comparison: the encoder and its `tokens` and `words` rows of the corpus."""

    encoder: LoadedEncoder
    tokens: pl.DataFrame  # example_id, position, token_id, token_class, segment
    words: pl.DataFrame  # example_id, word_index, piece_start, piece_end

    @property
    def total_heads(self) -> int:
        """Heads over all layers: the model's side of the (heads x other heads) distance matrix."""
        return self.encoder.spec.n_layers * self.encoder.spec.n_heads


def shared_words(first: pl.DataFrame, second: pl.DataFrame) -> pl.DataFrame:
    """The (example_id, word_index) words with pieces in both models' `words` rows, sorted."""

    def with_pieces(words: pl.DataFrame) -> pl.DataFrame:
        return words.filter(pl.col("piece_end") > pl.col("piece_start")).select("example_id", "word_index")

    return (
        with_pieces(first).join(with_pieces(second), on=["example_id", "word_index"]).sort("example_id", "word_index")
    )


def _example_rows(side: MatchSide, words: pl.DataFrame) -> Iterator[tuple[int, torch.Tensor]]:
    """Per example of `words` (shared words only): (example_id, (n_words, L*H, n_words + 1) rows)
    with the columns of its shared words in word_index order, then rest."""
    spans = side.words.join(words, on=["example_id", "word_index"]).select(
        "example_id", "word_index", "piece_start", "piece_end"
    )
    tokens = side.tokens.filter(pl.col("example_id").is_in(words["example_id"].unique().implode()))
    encoder = side.encoder
    device = encoder.compute.device
    batches = length_batches(
        tokens,
        encoder.tokenizer.pad_token_id or 0,
        encoder.compute.batch_tokens(),
        encoder.spec.takes_token_types,
        spans,
    )
    for batch in batches:
        batch = batch.to(device)
        attn = float32_maps(encoder.model(**batch.inputs, output_attentions=True).attentions)
        rows = word_distributions(attn, batch.word_spans)
        has_pieces = batch.word_spans[..., 1] > batch.word_spans[..., 0]
        for index, example_id in enumerate(batch.example_ids.tolist()):
            kept = has_pieces[index].nonzero().squeeze(-1)
            columns = torch.cat([kept, torch.tensor([rows.shape[-1] - 1], device=device)])
            yield example_id, rows[index][:, kept][:, :, columns].transpose(0, 1)


@dataclass(frozen=True)
class HeadMatches:
    distances: pl.DataFrame  # layer, head, other_layer, other_head, js_distance (every pair, 1-based)
    n_examples: int
    n_words: int


def match_heads(
    first: MatchSide,
    second: MatchSide,
    max_examples: int | None = None,
    progress: Callable[[int, int, float], None] | None = None,
) -> HeadMatches:
    """Mean Jensen-Shannon distance between every head of `first` and every head of `second` over
    the word rows of their shared examples (the first `max_examples` by example_id)."""
    words = shared_words(first.words, second.words)
    examples = words["example_id"].unique().sort()
    if max_examples is not None:
        examples = examples.head(max_examples)
    if examples.is_empty():
        raise ValueError(
            "match_heads: the two models share no example with words that have pieces in both; "
            "materialize the corpus's examples for both models first."
        )
    sums = torch.zeros(first.total_heads, second.total_heads, dtype=torch.float64)
    n_words = 0
    started = time.perf_counter()
    with torch.inference_mode():
        for start in range(0, examples.len(), EXAMPLES_PER_CHUNK):
            chunk = words.filter(pl.col("example_id").is_in(examples[start : start + EXAMPLES_PER_CHUNK].implode()))
            from_first = dict(_example_rows(first, chunk))
            for example_id, q in _example_rows(second, chunk):
                p = from_first[example_id].to(q.device)
                sums += js_distance_sums(p, q).cpu()
                n_words += p.shape[0]
            if progress:
                progress(min(start + EXAMPLES_PER_CHUNK, examples.len()), examples.len(), time.perf_counter() - started)
    distances = distance_rows(sums / n_words, first.encoder.spec.n_heads, second.encoder.spec.n_heads)
    return HeadMatches(distances, examples.len(), n_words)


DISTANCE_SCHEMA = {
    "layer": pl.Int16,
    "head": pl.Int16,
    "other_layer": pl.Int16,
    "other_head": pl.Int16,
    "js_distance": pl.Float64,
}
HEAD_MATCH_SCHEMA = {
    **DISTANCE_SCHEMA,
    "other_model_id": pl.String,
    "n_examples": pl.Int32,
    "n_words": pl.Int64,
}


def distance_rows(distances: torch.Tensor, heads_first: int, heads_second: int) -> pl.DataFrame:
    """Rows of an (A, B) head distance matrix, head index = layer * heads + head (0-based), as
    1-based layer, head, other_layer, other_head and js_distance."""
    first, second = np.meshgrid(np.arange(distances.shape[0]), np.arange(distances.shape[1]), indexing="ij")
    first, second = first.ravel(), second.ravel()
    return pl.DataFrame(
        {
            "layer": first // heads_first + 1,
            "head": first % heads_first + 1,
            "other_layer": second // heads_second + 1,
            "other_head": second % heads_second + 1,
            "js_distance": distances.numpy().ravel(),
        },
        schema=DISTANCE_SCHEMA,
    )


@dataclass(frozen=True)
class HeadMatchTable:
    """The head_matches rows of one model against others."""

    rows: pl.DataFrame  # HEAD_MATCH_SCHEMA: every head pair with each other model
    compared: dict[str, int]  # other model -> shared examples compared
    expected_rows: int  # one per head pair


def match_against_models(
    model_id: str,
    others: Sequence[str],
    side: Callable[[str], MatchSide],
    max_examples: int | None,
    progress: Callable[[str], Callable[[int, int, float], None]],
    log: Callable[[str], None],
) -> HeadMatchTable:
    """Every head of model `model_id` against every head of each of `others` (match_heads on the
    first `max_examples` shared examples). `side` loads a model's side: the others one at a time,
    so at most two models are held. `progress` gives the callback of the match with the named
    other model; `log` takes each match's counts."""
    frames, compared, expected = [], {}, 0
    own = side(model_id) if others else None
    for other in others:
        their = side(other)
        matches = match_heads(own, their, max_examples, progress(other))
        log(f"{other}: {matches.n_examples} shared examples, {matches.n_words} word rows")
        compared[other] = matches.n_examples
        expected += own.total_heads * their.total_heads
        frames.append(
            matches.distances.with_columns(
                other_model_id=pl.lit(other),
                n_examples=pl.lit(matches.n_examples, pl.Int32),
                n_words=pl.lit(matches.n_words, pl.Int64),
            )
        )
    rows = pl.concat(frames) if frames else pl.DataFrame(schema=HEAD_MATCH_SCHEMA)
    return HeadMatchTable(rows, compared, expected)


def distances_in_range(frame: pl.DataFrame, expected_rows: int) -> CheckOutcome:
    """Every js_distance is finite and within [0, sqrt(ln 2)], and there is one row per head pair."""
    # float32 entropies can overshoot the bound by rounding
    bound = pl.col("js_distance").is_between(0, MAX_JS_DISTANCE + 1e-5)
    bad = frame.filter(~pl.col("js_distance").is_finite() | ~bound)
    return CheckOutcome(
        "distances_in_range",
        bad.is_empty() and frame.height == expected_rows,
        f"Every js_distance is finite and in [0, sqrt(ln 2)], one row per head pair ({expected_rows}).",
        {"rows": frame.height, "expected_rows": expected_rows, "out_of_range": bad.height},
    )
