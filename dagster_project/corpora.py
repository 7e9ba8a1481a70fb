"""Corpora: read text pairs from the data directory and encode them for one tokenizer.

A corpus is read into a frame of (example_id, source_ref, text_a, text_b), with
example ids stable across runs, then sampled with a seed and encoded. Examples
longer than the corpus's max_len (in the model's own tokens) are dropped and counted,
never truncated.
"""

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
from transformers import PreTrainedTokenizerBase

DEMO_CORPUS_FILE = Path(__file__).with_name("demo_corpus.tsv")
XNLI_TEST_ID_OFFSET = 100_000
PUNCTUATION = frozenset({".", ","})
_SPACE_MARKERS = "Ġ▁"


class CorpusError(RuntimeError):
    """A corpus file is missing or malformed."""


@dataclass(frozen=True)
class CorpusSpec:
    name: str
    description: str
    files: tuple[str, ...]  # relative to the data directory
    read: Callable[[Path], pl.DataFrame]
    max_len: int
    size: int
    seed: int = 13

    def missing_files(self, data_dir: Path) -> list[Path]:
        return [data_dir / name for name in self.files if not (data_dir / name).is_file()]


@dataclass(frozen=True)
class EncodedCorpus:
    """One corpus tokenized for one model: `examples` and `tokens` rows, plus what was dropped."""

    examples: pl.DataFrame
    tokens: pl.DataFrame
    n_candidates: int
    n_too_long: int


def _require(path: Path) -> Path:
    if not path.is_file():
        raise CorpusError(
            f"Corpus file not found: {path}. Point the data directory at a copy of the shared "
            "data (environment variable ATTN_DATA_DIR, or the `data_dir` resource config in Dagster)."
        )
    return path


_WIKITEXT_MARKUP = ((" @-@ ", "-"), (" @,@ ", ","), (" @.@ ", "."))
_WIKITEXT_SPACING = (
    (re.compile(r" ([.,;:!?%)\]])"), r"\1"),
    (re.compile(r"([(\[$]) "), r"\1"),
    (re.compile(r" ('s|'re|'ve|'d|'ll|'m|n't)\b"), r"\1"),
)


def detokenize_wikitext(text: str) -> str:
    """Undo WikiText's tokenization markup (`@-@`, `@,@`, `@.@`, spaced punctuation)."""
    for marker, plain in _WIKITEXT_MARKUP:
        text = text.replace(marker, plain)
    for pattern, replacement in _WIKITEXT_SPACING:
        text = pattern.sub(replacement, text)
    return text.strip()


def read_wikitext_pairs(path: Path) -> pl.DataFrame:
    """Consecutive paragraph pairs of the same section of a raw WikiText file.

    Headings look like `= Title =`, `= = Section = =`; a pair never crosses one.
    """
    pairs: list[tuple[str, str, str]] = []
    headings: list[str] = []
    previous: str | None = None
    paragraph_index = 0
    with _require(path).open(encoding="utf-8") as lines:
        for line in lines:
            text = line.strip()
            if not text:
                continue
            if text.startswith("= ") and text.endswith(" ="):
                level = len(re.match(r"^(= )+", text).group(0)) // 2
                headings = headings[: level - 1] + [text.strip("= ").strip()]
                previous, paragraph_index = None, 0
                continue
            paragraph = detokenize_wikitext(text)
            if previous is not None:
                pairs.append((f"{' § '.join(headings)} ¶{paragraph_index}", previous, paragraph))
            previous = paragraph
            paragraph_index += 1
    if not pairs:
        raise CorpusError(f"{path}: no consecutive same-section paragraph pairs found; is it a raw WikiText file?")
    refs, first, second = zip(*pairs)
    return pl.DataFrame(
        {"example_id": np.arange(len(pairs), dtype=np.int32), "source_ref": refs, "text_a": first, "text_b": second}
    )


def _read_tsv(path: Path, columns: list[str]) -> pl.DataFrame:
    try:
        frame = pl.read_csv(_require(path), separator="\t", quote_char=None, infer_schema=False)
    except pl.exceptions.PolarsError as error:
        raise CorpusError(f"{path}: not a readable tab-separated file ({error})") from error
    missing = [column for column in columns if column not in frame.columns]
    if missing:
        raise CorpusError(f"{path}: missing column(s) {missing}; expected a header with {columns}")
    return frame.select(columns)


def read_xnli_pairs(data_dir: Path, language: str = "en") -> pl.DataFrame:
    """XNLI premise/hypothesis pairs (validation, then test) for one language.

    Ids are the XNLI row ids (test rows offset by 100000), identical across languages,
    so parallel rows share an example_id.
    """
    frames = []
    for split, offset in (("validation", 0), ("test", XNLI_TEST_ID_OFFSET)):
        frame = _read_tsv(data_dir / "xnli" / f"xnli_{split}_{language}.tsv", ["id", "premise", "hypothesis"])
        frames.append(
            frame.select(
                example_id=pl.col("id").cast(pl.Int32) + offset,
                source_ref=pl.lit(f"{split}:") + pl.col("id"),
                text_a=pl.col("premise"),
                text_b=pl.col("hypothesis"),
            )
        )
    return pl.concat(frames)


def read_demo_pairs(_data_dir: Path | None = None) -> pl.DataFrame:
    """The small sentence-pair corpus shipped inside the package (needs no data directory)."""
    frame = _read_tsv(DEMO_CORPUS_FILE, ["text_a", "text_b"])
    return frame.with_row_index("example_id").select(
        pl.col("example_id").cast(pl.Int32),
        source_ref=pl.lit("demo:") + pl.col("example_id").cast(pl.String),
        text_a="text_a",
        text_b="text_b",
    )


CORPORA: dict[str, CorpusSpec] = {
    spec.name: spec
    for spec in (
        CorpusSpec(
            name="demo",
            description="Built-in sentence pairs shipped with the project (no data directory needed).",
            files=(),
            read=read_demo_pairs,
            max_len=128,
            size=1000,
        ),
        CorpusSpec(
            name="wiki_segments",
            description="Clark §3: consecutive same-section WikiText paragraph pairs, [CLS] p1 [SEP] p2 [SEP].",
            files=("wikipedia/wikitext2_raw_wiki.test.raw",),
            read=lambda data_dir: read_wikitext_pairs(data_dir / "wikipedia" / "wikitext2_raw_wiki.test.raw"),
            max_len=128,
            size=1000,
        ),
        CorpusSpec(
            name="xnli_en",
            description="Pascual: XNLI English premise/hypothesis pairs (stand-in for MNLI-m dev).",
            files=tuple(f"xnli/xnli_{split}_en.tsv" for split in ("validation", "test")),
            read=read_xnli_pairs,
            max_len=64,
            size=1800,
        ),
    )
}


def punctuation_ids(tokenizer: PreTrainedTokenizerBase) -> np.ndarray:
    """Ids of the vocabulary entries that are a bare '.' or ',' (leading-space markers ignored)."""
    return np.array(
        [index for piece, index in tokenizer.get_vocab().items() if piece.lstrip(_SPACE_MARKERS) in PUNCTUATION],
        dtype=np.int64,
    )


def encode_corpus(
    texts: pl.DataFrame, tokenizer: PreTrainedTokenizerBase, max_len: int, size: int, seed: int
) -> EncodedCorpus:
    """Sample up to `size` examples that fit in `max_len` tokens, in a seeded random order."""
    order = np.random.default_rng(seed).permutation(texts.height)
    shuffled = texts[order]
    encoded = tokenizer(
        shuffled["text_a"].to_list(),
        shuffled["text_b"].to_list(),
        return_special_tokens_mask=True,
        return_token_type_ids=True,
    )
    lengths = np.fromiter((len(ids) for ids in encoded["input_ids"]), dtype=np.int64, count=shuffled.height)
    fits = lengths <= max_len
    keep = np.flatnonzero(fits)[:size]
    if keep.size == 0:
        raise CorpusError(f"no example of {texts.height} fits in {max_len} tokens; raise max_len or check the texts")
    examples = shuffled[keep].with_columns(n_tokens=pl.Series(lengths[keep], dtype=pl.Int16))
    ids = [encoded["input_ids"][i] for i in keep]
    tokens = pl.DataFrame(
        {
            "example_id": examples["example_id"],
            "token_id": ids,
            "is_special": [encoded["special_tokens_mask"][i] for i in keep],
            "token_type": [encoded["token_type_ids"][i] for i in keep],
            "token": [tokenizer.convert_ids_to_tokens(row) for row in ids],
        }
    ).explode(["token_id", "is_special", "token_type", "token"])
    tokens = tokens.with_columns(
        position=pl.int_range(pl.len()).over("example_id").cast(pl.Int16),
        is_special=pl.col("is_special").cast(pl.Boolean),
    ).with_columns(
        token_class=pl.when(pl.col("token_id") == tokenizer.cls_token_id)
        .then(pl.lit("cls"))
        .when(pl.col("token_id") == tokenizer.sep_token_id)
        .then(pl.lit("sep"))
        .when(pl.col("token_id").is_in(punctuation_ids(tokenizer).tolist()))
        .then(pl.lit("punct"))
        .when(pl.col("is_special"))
        .then(pl.lit("special"))
        .otherwise(pl.lit("other")),
    )
    # Models without token types (RoBERTa...) get 0s from the tokenizer; the segment then
    # follows the separators: a token belongs to segment k if k separators precede it.
    sep_before = (pl.col("token_class") == "sep").cast(pl.Int16).cum_sum().shift(1, fill_value=0).over("example_id")
    tokens = tokens.with_columns(
        segment=pl.when(pl.col("token_type").max().over("example_id") > 0)
        .then(pl.col("token_type"))
        .otherwise(pl.min_horizontal(sep_before, 1))
        .cast(pl.Int8)
    ).drop("token_type")
    return EncodedCorpus(
        examples=examples.sort("example_id"),
        tokens=tokens.select("example_id", "position", "token_id", "token", "token_class", "is_special", "segment"),
        n_candidates=texts.height,
        n_too_long=int((~fits).sum()),
    )
