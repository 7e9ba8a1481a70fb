"""What every corpus reader produces, and the helpers they share."""

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl
from transformers import PreTrainedTokenizerBase

# What encoding does with an example over max_len pieces: drop it (counted), or cut it to
# max_len (the longer segment loses its last piece until the pair fits).
# What happens to an example longer than max_len pieces: dropped, or truncated (texts: the longer
# segment loses pieces; documents: their first max_len pieces).
OVERLONG = ("drop", "truncate")
# Documents (corpora with CorpusSpec.prepare) can also be cut into sentence windows.
DOCUMENT_OVERLONG = (*OVERLONG, "windows")


class CorpusError(RuntimeError):
    """A corpus file is missing or malformed; the message names the file (and line)."""


@dataclass(frozen=True)
class CorpusData:
    """A corpus as read from its files, before any tokenizer sees it.

    texts: one row per candidate example: example_id (stable across runs), source_ref,
        text_a, text_b (null for single texts), and optionally split, label, label_text,
        group_id (shared by parallel rows or by the windows of one document).
    words: the corpus's own words (example_id, segment, word_index, word, char_start,
        char_end; offsets into that segment's text), or None to split the texts with
        `split_words`. word_index runs over both segments of an example.
    annotations: gold tables keyed by example_id (dependencies, coref_mentions, ...).
    problems: malformed input a lenient reader skipped, one message (file, line) each.
    """

    texts: pl.DataFrame
    words: pl.DataFrame | None = None
    annotations: dict[str, pl.DataFrame] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class CorpusSpec:
    name: str
    description: str
    # Relative to the data directory; a tuple entry lists alternatives (any one will do).
    files: tuple[str | tuple[str, ...], ...]
    read: Callable[[Path], CorpusData]
    max_len: int
    size: int | None  # None: every example that fits
    overlong: str = "drop"  # one of OVERLONG (DOCUMENT_OVERLONG with `prepare`)
    # Pascual: the default max_len is the model's head dimension d_head (inputs no longer than
    # d_head keep attention identifiable; 64 for BERT-base); max_len is then the paper's fixed cap.
    max_len_is_d_head: bool = False
    seed: int = 13
    spacy_features: bool = False  # annotate words with spaCy (corpora without gold syntax)
    default: bool = True  # part of `attn-warehouse run` without --corpus
    # A corpus none of the three papers used (CoLA, WNLI, the built-in demo pairs): left out of
    # `--corpus all` and `attn-warehouse reproduce`, processed only when a run names it, and labelled
    # as outside the papers.
    outside_papers: bool = False
    hta: bool = False  # Hidden Token Attribution facts (Pascual et al.)
    # Fact kinds of the attention pass (compute.fact_kinds.FACT_KINDS) beyond the head summaries
    # every analysed corpus gets; None: not analysed for attention (training splits).
    fact_kinds: tuple[str, ...] | None = ("position_histograms",)
    annotations: tuple[str, ...] = ()  # gold tables the reader writes (dependencies, coref_mentions, ...)
    # Tokenizer-dependent preparation before encoding, given max_len and overlong: documents
    # truncated or cut into windows (coreference.prepare_documents). Encoding then drops what
    # still does not fit.
    prepare: Callable[[CorpusData, PreTrainedTokenizerBase, int, str], CorpusData] | None = None

    def default_max_len(self, d_head: int) -> int:
        """max_len for a model whose attention heads have dimension d_head, unless run config sets one."""
        return d_head if self.max_len_is_d_head else self.max_len

    @property
    def attention(self) -> bool:
        """Analysed for attention (has a facts asset)."""
        return self.fact_kinds is not None

    @property
    def provides(self) -> frozenset[str]:
        """What the corpus's rows give a fact kind besides tokens: its words, their spaCy
        features when it is annotated, and its gold tables."""
        return frozenset({"words", *(["word_features"] if self.spacy_features else []), *self.annotations})

    def missing_files(self, data_dir: Path) -> list[Path]:
        missing = []
        for entry in self.files:
            options = (entry,) if isinstance(entry, str) else entry
            if not any((data_dir / name).is_file() for name in options):
                missing.append(data_dir / options[0])
        return missing


def require_file(path: Path) -> Path:
    if not path.is_file():
        raise CorpusError(
            f"Corpus file not found: {path}. Point the data directory at a copy of the shared "
            "data (environment variable ATTN_DATA_DIR, or the `data_dir` resource config in Dagster)."
        )
    return path


def decoding_error(path: Path, raw: bytes | None = None) -> CorpusError:
    """The first byte of `path` (whose bytes are `raw`) that is not UTF-8, as an error naming
    the file, the line and the byte offset."""
    raw = path.read_bytes() if raw is None else raw
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as error:
        line = raw.count(b"\n", 0, error.start) + 1
        column = error.start - (raw.rfind(b"\n", 0, error.start) + 1) + 1
        bad = " ".join(f"0x{byte:02x}" for byte in raw[error.start : error.end])
        return CorpusError(
            f"{path}, line {line}, byte offset {error.start}: byte {bad} is not UTF-8 ({error.reason}, "
            f"column {column} of the line); re-encode the file as UTF-8 (e.g. `iconv -f latin1 -t utf-8`)"
        )
    return CorpusError(f"{path}: not readable as UTF-8 text")


def read_lines(path: Path) -> Iterator[str]:
    """The lines of a UTF-8 text file (universal newlines); a byte that is not UTF-8 is a
    CorpusError naming the file, line and byte offset."""
    try:
        with require_file(path).open(encoding="utf-8") as lines:
            yield from lines
    except UnicodeDecodeError as error:
        raise decoding_error(path) from error


def read_text(path: Path) -> str:
    """A whole UTF-8 text file; a byte that is not UTF-8 is a CorpusError naming the file,
    line and byte offset."""
    raw = require_file(path).read_bytes()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise decoding_error(path, raw) from error


def _check_fields(path: Path, text: str) -> None:
    """Every row has as many tab-separated fields as the header (the reader would pad a short
    row with nulls, shifting a later value into the wrong column)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:
        return
    header = lines[0].removesuffix("\r").split("\t")
    for number, line in enumerate(lines[1:], start=2):
        found = line.removesuffix("\r").count("\t") + 1
        if found != len(header):
            raise CorpusError(
                f"{path}, line {number}: {found} tab-separated field{'s' if found != 1 else ''} where the header "
                f"has {len(header)} ({', '.join(header)}); a value or a tab is missing or extra in this row "
                "(values cannot hold tabs or line breaks)"
            )


def read_tsv(path: Path, columns: list[str]) -> pl.DataFrame:
    """A tab-separated file with a header holding at least `columns`, every value a string;
    every row has the header's number of fields."""
    _check_fields(path, read_text(path))
    try:
        frame = pl.read_csv(require_file(path), separator="\t", quote_char=None, infer_schema=False)
    except pl.exceptions.PolarsError as error:
        raise CorpusError(f"{path}: not a readable tab-separated file ({error})") from error
    missing = [column for column in columns if column not in frame.columns]
    if missing:
        raise CorpusError(f"{path}: missing column(s) {missing}; expected a header with {columns}")
    return frame


# Words of running text: letters/digits with inner apostrophes or hyphens ("don't",
# "well-known"), or a single other non-space character.
_WORD = re.compile(r"\w+(?:['’-]\w+)*|[^\w\s]")


# CorpusData.words: a corpus's own words with their character offsets in their segment's text.
WORDS_SCHEMA = {
    "example_id": pl.Int32,
    "segment": pl.Int8,
    "word_index": pl.Int32,
    "word": pl.String,
    "char_start": pl.Int32,
    "char_end": pl.Int32,
}


def split_words(texts: pl.DataFrame) -> pl.DataFrame:
    """Words of text_a (segment 0) and text_b (segment 1) with their character offsets."""
    rows: dict[str, list] = {
        name: [] for name in ("example_id", "segment", "word_index", "word", "char_start", "char_end")
    }
    has_b = "text_b" in texts.columns
    for example_id, text_a, text_b in zip(
        texts["example_id"], texts["text_a"], texts["text_b"] if has_b else [None] * texts.height
    ):
        index = 0
        for segment, text in enumerate((text_a, text_b)):
            for match in _WORD.finditer(text or ""):
                for name, value in zip(rows, (example_id, segment, index, match.group(), match.start(), match.end())):
                    rows[name].append(value)
                index += 1
    return pl.DataFrame(rows, schema=WORDS_SCHEMA)


def join_words(words: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Texts made of pre-tokenized words joined by single spaces, and the words' offsets.

    `words` has example_id, segment, word_index, word; returns (texts with text_a/text_b,
    words with char_start/char_end added).
    """
    words = (
        words.sort("example_id", "word_index")
        .with_columns(
            char_start=(pl.col("word").str.len_chars() + 1).cum_sum().over("example_id", "segment").cast(pl.Int32)
            - (pl.col("word").str.len_chars() + 1).cast(pl.Int32)
        )
        .with_columns(char_end=pl.col("char_start") + pl.col("word").str.len_chars().cast(pl.Int32))
    )
    texts = (
        words.group_by("example_id", "segment")
        .agg(pl.col("word").str.join(" "))
        .pivot(on="segment", index="example_id", values="word")
    )
    texts = (
        texts.rename({"0": "text_a"})
        .with_columns(text_b=pl.col("1") if "1" in texts.columns else pl.lit(None, dtype=pl.String))
        .select("example_id", "text_a", "text_b")
    )
    return texts.sort("example_id"), words
