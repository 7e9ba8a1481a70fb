"""Text-pair corpora: WikiText paragraph pairs, XNLI, GLUE, and the built-in demo pairs."""

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from dagster_project.corpora.base import CorpusData, CorpusError, read_lines, read_tsv

DEMO_CORPUS_FILE = Path(__file__).with_name("demo_corpus.tsv")
XNLI_TEST_ID_OFFSET = 100_000
XNLI_LABELS = {0: "entailment", 1: "neutral", 2: "contradiction"}


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


def read_wikitext_pairs(path: Path) -> CorpusData:
    """Consecutive paragraph pairs of the same section of a raw WikiText file.

    Headings look like `= Title =`, `= = Section = =`; a pair never crosses one.
    """
    pairs: list[tuple[str, str, str]] = []
    headings: list[str] = []
    previous: str | None = None
    paragraph_index = 0
    for line in read_lines(path):
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
    return CorpusData(
        texts=pl.DataFrame(
            {"example_id": np.arange(len(pairs), dtype=np.int32), "source_ref": refs, "text_a": first, "text_b": second}
        )
    )


def _integers(frame: pl.DataFrame, column: str, path: Path, allowed: Mapping[int, str] | None = None) -> pl.Series:
    """A column of a headed TSV as integers (of `allowed` where given); the first value that is
    not one names the file and line."""
    numbers = frame[column].cast(pl.Int64, strict=False)
    bad = numbers.is_null() if allowed is None else numbers.is_null() | ~numbers.is_in(list(allowed))
    if bad.any():
        row = bad.arg_true()[0]
        expected = f"one of {sorted(allowed)}" if allowed else "an integer"
        raise CorpusError(f"{path}, line {row + 2}: {column} {frame[column][row]!r} is not {expected}")
    return numbers


def read_xnli_pairs(data_dir: Path, language: str = "en") -> CorpusData:
    """XNLI premise/hypothesis pairs (validation, then test) for one language.

    Ids are the XNLI row ids (test rows offset by 100000), identical across languages,
    so parallel rows share an example_id.
    """
    frames = []
    for split, offset in (("validation", 0), ("test", XNLI_TEST_ID_OFFSET)):
        path = data_dir / "xnli" / f"xnli_{split}_{language}.tsv"
        frame = read_tsv(path, ["id", "premise", "hypothesis", "label"])
        ids, labels = _integers(frame, "id", path), _integers(frame, "label", path, XNLI_LABELS)
        frames.append(
            frame.select(
                example_id=ids.cast(pl.Int32) + offset,
                source_ref=pl.lit(f"{split}:") + pl.col("id"),
                text_a=pl.col("premise"),
                text_b=pl.col("hypothesis"),
                split=pl.lit(split),
                label=labels.cast(pl.Float64),
                label_text=labels.replace_strict(XNLI_LABELS, return_dtype=pl.String),
                group_id=ids.cast(pl.Int32) + offset,
            )
        )
    return CorpusData(texts=pl.concat(frames))


def read_demo_pairs(_data_dir: Path | None = None) -> CorpusData:
    """The small sentence-pair corpus shipped inside the package (needs no data directory)."""
    frame = read_tsv(DEMO_CORPUS_FILE, ["text_a", "text_b"])
    texts = frame.with_row_index("example_id").select(
        pl.col("example_id").cast(pl.Int32),
        source_ref=pl.lit("demo:") + pl.col("example_id").cast(pl.String),
        text_a="text_a",
        text_b="text_b",
    )
    return CorpusData(texts=texts)


@dataclass(frozen=True)
class GlueTask:
    """Where a GLUE task keeps its texts and labels, in HF parquet and in GLUE-style TSV."""

    tsv_folder: str
    parquet_text_columns: tuple[str, ...]
    tsv_text_columns: tuple[str, ...]
    tsv_label_column: str
    label_names: dict[int, str] | None  # None: a regression score (STS-B)
    # One of Kovaleva's tasks. The paper left CoLA and WNLI out ("We excluded two tasks: CoLa and
    # the Winograd Schema Challenge"): they are processed only when a run names them.
    kovaleva: bool = True


GLUE_TASKS = {
    "cola": GlueTask(
        "CoLA", ("sentence",), ("sentence",), "label", {0: "unacceptable", 1: "acceptable"}, kovaleva=False
    ),
    "sst2": GlueTask("SST-2", ("sentence",), ("sentence",), "label", {0: "negative", 1: "positive"}),
    "mrpc": GlueTask(
        "MRPC",
        ("sentence1", "sentence2"),
        ("#1 String", "#2 String"),
        "Quality",
        {0: "not_equivalent", 1: "equivalent"},
    ),
    "stsb": GlueTask("STS-B", ("sentence1", "sentence2"), ("sentence1", "sentence2"), "score", None),
    "rte": GlueTask(
        "RTE", ("sentence1", "sentence2"), ("sentence1", "sentence2"), "label", {0: "entailment", 1: "not_entailment"}
    ),
    "qnli": GlueTask(
        "QNLI", ("question", "sentence"), ("question", "sentence"), "label", {0: "entailment", 1: "not_entailment"}
    ),
    "wnli": GlueTask(
        "WNLI",
        ("sentence1", "sentence2"),
        ("sentence1", "sentence2"),
        "label",
        {0: "not_entailment", 1: "entailment"},
        kovaleva=False,
    ),
}
_TSV_SPLIT_FILES = {"validation": "dev.tsv", "train": "train.tsv", "test": "test.tsv"}


def glue_files(task: str, split: str) -> tuple[str, str]:
    """The HF parquet file and the GLUE-style TSV file of a task split (either will do)."""
    return (
        f"glue/hf_parquet/{task}_{split}.parquet",
        f"glue/glue_style_tsv/{GLUE_TASKS[task].tsv_folder}/{_TSV_SPLIT_FILES[split]}",
    )


def _numeric_labels(values: pl.Series, task: GlueTask, path: Path) -> pl.Series:
    """Label strings (names or numbers) -> numbers; an unknown value names the file and line."""
    if task.label_names is None:
        numbers = values.cast(pl.Float64, strict=False)
        allowed = "a number"
    else:
        lookup = {name: float(n) for n, name in task.label_names.items()} | {str(n): float(n) for n in task.label_names}
        numbers = values.replace_strict(lookup, default=None, return_dtype=pl.Float64)
        allowed = f"one of {sorted(lookup)}"
    bad = (numbers.is_null() & values.is_not_null()).arg_true()
    if len(bad):
        raise CorpusError(f"{path}, line {bad[0] + 2}: label {values[bad[0]]!r} is not {allowed}")
    return numbers


def _tsv_header(path: Path) -> list[str]:
    """The column names on the first line of a tab-separated file."""
    return next(read_lines(path), "").rstrip("\r\n").split("\t")


def read_glue(data_dir: Path, task: str, split: str) -> CorpusData:
    """A GLUE task split from HF parquet, else from GLUE-style TSV; labels as number and name.

    Test splits are unlabelled: label -1 in HF, no label column or an empty label in TSV,
    all kept as a null label. In the labelled splits (validation, train) a missing label is
    an error naming the file and row.
    """
    spec = GLUE_TASKS[task]
    parquet, tsv = (data_dir / name for name in glue_files(task, split))
    labelled = split != "test"
    if parquet.is_file():
        frame = pl.read_parquet(parquet)
        texts, ids = spec.parquet_text_columns, pl.col("idx").cast(pl.Int32)
        labels = frame["label"].cast(pl.Float64)
        missing = (labels.is_null() | (labels < 0)).arg_true()
        if labelled and len(missing):
            raise CorpusError(
                f"{parquet}, row {missing[0] + 1}: no label ({frame['label'][missing[0]]}) in the {split} split; "
                f"GLUE {split} rows are labelled, so the file is incomplete (re-export it, or drop the row)"
            )
        labels = pl.select(pl.when(labels >= 0).then(labels)).to_series()
        source = parquet
    else:
        unlabelled_test = not labelled and tsv.is_file() and spec.tsv_label_column not in _tsv_header(tsv)
        frame = read_tsv(tsv, [*spec.tsv_text_columns, *([] if unlabelled_test else [spec.tsv_label_column])])
        texts = spec.tsv_text_columns
        id_column = next((name for name in ("index", "idx", "idx_hf") if name in frame.columns), None)
        ids = pl.col(id_column).cast(pl.Int32) if id_column else pl.int_range(pl.len(), dtype=pl.Int32)
        if unlabelled_test:
            labels = pl.Series([None] * frame.height, dtype=pl.Float64)
        else:
            values = frame[spec.tsv_label_column]
            missing = values.is_null().arg_true()
            if labelled and len(missing):
                raise CorpusError(
                    f"{tsv}, line {missing[0] + 2}: empty label in the {split} split; GLUE {split} rows are "
                    f"labelled: fill in column {spec.tsv_label_column!r} or drop the row"
                )
            labels = _numeric_labels(values.str.strip_chars(), spec, tsv)
        source = tsv
    if frame.is_empty():
        raise CorpusError(f"{source}: no rows")
    label_names = spec.label_names or {}
    result = frame.select(
        example_id=ids,
        source_ref=pl.lit(f"{split}:") + ids.cast(pl.String),
        text_a=pl.col(texts[0]),
        text_b=pl.col(texts[1]) if len(texts) > 1 else pl.lit(None, dtype=pl.String),
        split=pl.lit(split),
    ).with_columns(
        label=labels,
        label_text=labels.cast(pl.Int64, strict=False).replace_strict(label_names, default=None, return_dtype=pl.String)
        if label_names
        else labels.cast(pl.String),
    )
    return CorpusData(texts=result)
