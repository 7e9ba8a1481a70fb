"""Encoding a corpus for one tokenizer: sampling, examples, word pieces, and the
word <-> piece alignment, computed from the tokenizer's character offsets."""

from dataclasses import dataclass

import numpy as np
import polars as pl
from transformers import BatchEncoding, PreTrainedTokenizerBase

from dagster_project.corpora.base import OVERLONG, CorpusData, CorpusError, split_words

PUNCTUATION = frozenset({".", ","})
_SPACE_MARKERS = "Ġ▁"


@dataclass(frozen=True)
class EncodedCorpus:
    """One corpus tokenized for one model: the rows of `examples`, `tokens`, `words` and the
    annotation tables, restricted to the kept examples, plus what was dropped."""

    examples: pl.DataFrame
    tokens: pl.DataFrame
    words: pl.DataFrame
    annotations: dict[str, pl.DataFrame]
    n_candidates: int
    n_too_long: int  # candidates over max_len pieces (dropped or truncated, as `overlong` says)
    n_truncated: int = 0  # kept examples cut to max_len pieces (overlong = truncate)


def punctuation_ids(tokenizer: PreTrainedTokenizerBase) -> list[int]:
    """Ids of the vocabulary entries that are a bare '.' or ',' (leading-space markers ignored)."""
    return [index for piece, index in tokenizer.get_vocab().items() if piece.lstrip(_SPACE_MARKERS) in PUNCTUATION]


def token_classes(tokenizer: PreTrainedTokenizerBase) -> pl.Expr:
    """Each piece's class from the tokenizer's own ids: 'cls' / 'sep' for the [CLS] (RoBERTa's `<s>`) and
    every separator (`</s>`, both of a `</s></s>` run) the tokenizer added around the segments, 'special'
    for other tokens it added, 'punct' for a bare '.' or ',', else 'other'. Only added tokens
    (`is_special`, the special-tokens mask) are special: a text piece is text even where a
    SentencePiece vocabulary reads '<s>' in a sentence as the id of `<s>`."""
    added = pl.col("is_special")
    token = pl.col("token_id")
    return (
        pl.when(added & (token == tokenizer.cls_token_id))
        .then(pl.lit("cls"))
        .when(added & (token == tokenizer.sep_token_id))
        .then(pl.lit("sep"))
        .when(added)
        .then(pl.lit("special"))
        .when(token.is_in(punctuation_ids(tokenizer)))
        .then(pl.lit("punct"))
        .otherwise(pl.lit("other"))
    )


def align_words(words: pl.DataFrame, tokens: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Map words to their pieces, and pieces to their word, by character offsets.

    words: example_id, segment, word_index, char_start, char_end (offsets in the segment text);
    tokens: example_id, position, sequence (segment of the piece; null for special tokens),
    char_start, char_end. Works for every tokenizer family whose fast tokenizer reports
    offsets (WordPiece '##', byte-level BPE 'Ġ', SentencePiece '▁'):
    - a word's pieces are those overlapping its span, [piece_start, piece_end); a piece that
      crosses a word boundary (SentencePiece '▁it?') is shared by both words;
    - a piece's word_index is the word holding its last character (SentencePiece offsets may
      start at the space before a word; a bare space piece has no word).
    """
    keys = [pl.col("example_id").cast(pl.Int32), pl.col("segment").cast(pl.Int8)]
    pieces = tokens.filter(pl.col("sequence").is_not_null()).select(
        keys[0], pl.col("sequence").cast(pl.Int8).alias("segment"), "position", "char_start", "char_end"
    )
    spans = words.select(*keys, "word_index", "char_start", "char_end")
    by = ["example_id", "segment"]
    # First piece ending after the word starts, last piece starting before the word ends.
    first = (
        spans.with_columns(probe=pl.col("char_start") + 1)
        .sort("probe")
        .join_asof(
            pieces.select(*by, "position", piece_end=pl.col("char_end")).sort("piece_end"),
            left_on="probe",
            right_on="piece_end",
            by=by,
            strategy="forward",
            check_sortedness=False,
        )
    )
    last = (
        spans.with_columns(probe=pl.col("char_end") - 1)
        .sort("probe")
        .join_asof(
            pieces.select(*by, "position", piece_begin=pl.col("char_start")).sort("piece_begin"),
            left_on="probe",
            right_on="piece_begin",
            by=by,
            strategy="backward",
            check_sortedness=False,
        )
    )
    piece_spans = (
        first.select("example_id", "word_index", piece_start="position")
        .join(last.select("example_id", "word_index", last_piece="position"), on=["example_id", "word_index"])
        .select(
            "example_id",
            "word_index",
            valid=pl.col("piece_start") <= pl.col("last_piece"),
            piece_start=pl.col("piece_start").cast(pl.Int16),
            piece_end=(pl.col("last_piece") + 1).cast(pl.Int16),
        )
    )
    piece_spans = piece_spans.with_columns(
        pl.when("valid").then(pl.col(name)).alias(name) for name in ("piece_start", "piece_end")
    ).drop("valid")
    owner = (
        pieces.with_columns(probe=pl.col("char_end") - 1)
        .sort("probe")
        .join_asof(
            spans.select(*by, "word_index", "char_start", word_end="char_end").sort("char_start"),
            left_on="probe",
            right_on="char_start",
            by=by,
            strategy="backward",
            check_sortedness=False,
        )
        .filter(pl.col("probe") < pl.col("word_end"))
    )
    words, tokens = (frame.with_columns(keys[0]) for frame in (words, tokens))
    aligned = words.join(piece_spans, on=["example_id", "word_index"], how="left").sort("example_id", "word_index")
    token_words = tokens.join(
        owner.select("example_id", "position", "word_index"), on=["example_id", "position"], how="left"
    )
    return aligned, token_words.sort("example_id", "position")


def _cut_texts(texts: pl.DataFrame, rows: np.ndarray, encoded: BatchEncoding) -> pl.DataFrame:
    """`texts` with the texts of `rows` cut after the last character of their last kept piece,
    so the stored text, its words and spaCy see what the model sees. `encoded` holds the
    truncated encodings of `rows`, in order."""
    columns = {name: texts[name].to_list() for name in ("text_a", "text_b") if name in texts.columns}
    for index, row in enumerate(rows):
        ends = [0, 0]
        for sequence, (_, char_end) in zip(encoded.sequence_ids(index), encoded["offset_mapping"][index]):
            if sequence is not None:
                ends[sequence] = max(ends[sequence], char_end)
        for segment, values in enumerate(columns.values()):
            if values[row] is not None:
                values[row] = values[row][: ends[segment]]
    return texts.with_columns(pl.Series(name, values, dtype=pl.String) for name, values in columns.items())


def encode_corpus(
    data: CorpusData,
    tokenizer: PreTrainedTokenizerBase,
    max_len: int,
    size: int | None,
    seed: int,
    overlong: str = "drop",
) -> EncodedCorpus:
    """Sample up to `size` examples in a seeded order; examples over `max_len` pieces are
    dropped (`overlong="drop"`) or cut to `max_len` (`"truncate"`, Clark §3: the longer
    segment loses its last piece until the pair fits, as BERT's pre-training data does)."""
    if overlong not in OVERLONG:
        raise ValueError(f"overlong must be one of {OVERLONG}, got {overlong!r}")
    if overlong == "truncate" and (data.words is not None or data.annotations):
        raise ValueError(
            "overlong='truncate' cuts texts, but this corpus brings its own words or gold annotations "
            "that would point past the cut; use overlong='drop'"
        )
    texts = data.texts
    if texts.is_empty():
        raise CorpusError("the corpus has no examples")
    order = np.random.default_rng(seed).permutation(texts.height)
    shuffled = texts[order]
    has_b = "text_b" in shuffled.columns and shuffled["text_b"].is_not_null().any()

    def tokenize(frame: pl.DataFrame, **truncation):
        segments = [frame["text_a"].to_list(), *([frame["text_b"].to_list()] if has_b else [])]
        return tokenizer(
            *segments,
            split_special_tokens=True,  # text is text: '[SEP]' or '<s>' in a sentence is no separator
            return_special_tokens_mask=True,
            return_token_type_ids=True,
            return_offsets_mapping=True,
            verbose=False,
            **truncation,
        )

    encoded = tokenize(shuffled)
    lengths = np.fromiter((len(ids) for ids in encoded["input_ids"]), dtype=np.int64, count=shuffled.height)
    fits = lengths <= max_len
    keep = (np.arange(shuffled.height) if overlong == "truncate" else np.flatnonzero(fits))[:size]
    if keep.size == 0:
        raise CorpusError(f"no example of {texts.height} fits in {max_len} tokens; raise max_len or check the texts")
    cut_rows = keep[~fits[keep]]
    # Where each kept example's pieces come from: the whole encoding, or its truncated one.
    source = {int(row): (encoded, int(row)) for row in keep}
    if cut_rows.size:
        cut = tokenize(shuffled[cut_rows], truncation="longest_first", max_length=max_len)
        shuffled = _cut_texts(shuffled, cut_rows, cut)
        source |= {int(row): (cut, index) for index, row in enumerate(cut_rows)}
    pieces = [source[int(row)] for row in keep]

    def column(key: str) -> list:
        return [batch[key][index] for batch, index in pieces]

    ids = column("input_ids")
    examples = shuffled[keep].with_columns(
        n_tokens=pl.Series([len(row) for row in ids], dtype=pl.Int16),
        overlong=pl.lit(overlong),
        truncated_from=pl.Series([None if fits[row] else int(lengths[row]) for row in keep], dtype=pl.Int16),
    )
    offsets = column("offset_mapping")
    tokens = pl.DataFrame(
        {
            "example_id": examples["example_id"],
            "token_id": ids,
            "is_special": column("special_tokens_mask"),
            "token_type": column("token_type_ids"),
            "token": [tokenizer.convert_ids_to_tokens(row) for row in ids],
            "sequence": [batch.sequence_ids(index) for batch, index in pieces],
            "char_start": [[start for start, _ in row] for row in offsets],
            "char_end": [[end for _, end in row] for row in offsets],
        },
        schema_overrides={"sequence": pl.List(pl.Int8), "char_start": pl.List(pl.Int32), "char_end": pl.List(pl.Int32)},
    ).explode(["token_id", "is_special", "token_type", "token", "sequence", "char_start", "char_end"])
    tokens = tokens.with_columns(
        position=pl.int_range(pl.len()).over("example_id").cast(pl.Int16),
        is_special=pl.col("is_special").cast(pl.Boolean),
    ).with_columns(token_class=token_classes(tokenizer))
    # Models without token types (RoBERTa...) get 0s from the tokenizer; the segment then
    # follows the separators: a token belongs to segment k if k separators precede it.
    sep_before = (pl.col("token_class") == "sep").cast(pl.Int16).cum_sum().shift(1, fill_value=0).over("example_id")
    tokens = tokens.with_columns(
        segment=pl.when(pl.col("token_type").max().over("example_id") > 0)
        .then(pl.col("token_type"))
        .otherwise(pl.min_horizontal(sep_before, 1))
        .cast(pl.Int8)
    )
    kept_ids = examples["example_id"].implode()
    words = data.words if data.words is not None else split_words(examples)
    words, tokens = align_words(words.filter(pl.col("example_id").is_in(kept_ids)), tokens)
    return EncodedCorpus(
        examples=examples.sort("example_id"),
        tokens=tokens.select(
            "example_id", "position", "token_id", "token", "token_class", "is_special", "segment", "word_index"
        ),
        words=words.select(
            "example_id", "segment", "word_index", "word", "char_start", "char_end", "piece_start", "piece_end"
        ),
        annotations={
            name: rows.filter(pl.col("example_id").is_in(kept_ids)) for name, rows in data.annotations.items()
        },
        n_candidates=texts.height,
        n_too_long=int((~fits).sum()),
        n_truncated=int(cut_rows.size),
    )
