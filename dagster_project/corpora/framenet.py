"""FrameNet 1.7 full-text (open-sesame CoNLL, one block per annotated target) as the
Kovaleva §4.2 link set: one example per frame annotation (the paper used FrameNet's example
sentences, each annotated with one frame), linking its lexical unit to its core frame elements,
kept only when the whole annotation passes the paper's filters."""

import json
from pathlib import Path

import polars as pl

from dagster_project.corpora.base import CorpusData, CorpusError, join_words, read_lines, read_text

MAX_SENTENCE_WORDS = 12
MAX_ELEMENT_WORDS = 3
MIN_LINK_DISTANCE = 2


def _blocks(path: Path) -> list[list[tuple[int, list[str]]]]:
    """(line number, 5 columns) of every token line, grouped into blocks."""
    blocks, block = [], []
    for number, line in enumerate([*read_lines(path), "\n"], start=1):
        if not line.strip():
            if block:
                blocks.append(block)
            block = []
            continue
        columns = line.rstrip("\n").split("\t")
        if len(columns) != 5:
            raise CorpusError(
                f"{path}, line {number}: expected 5 tab-separated columns (index, token, LU, frame, FE tag), "
                f"found {len(columns)}"
            )
        if columns[4] != "O" and columns[4][:2] not in ("B-", "I-"):
            raise CorpusError(f"{path}, line {number}: frame element tag {columns[4]!r} is not O, B-<name> or I-<name>")
        block.append((number, columns))
    return blocks


def _spans(tags: list[str]) -> list[tuple[str, int, int]]:
    """(name, start, end exclusive) of the BIO-tagged frame elements."""
    spans: list[tuple[str, int, int]] = []
    for index, tag in enumerate(tags):
        if tag.startswith("B-") or (
            tag.startswith("I-") and (not spans or spans[-1][0] != tag[2:] or spans[-1][2] != index)
        ):
            spans.append((tag[2:], index, index + 1))
        elif tag.startswith("I-"):
            name, start, _ = spans[-1]
            spans[-1] = (name, start, index + 1)
    return spans


def _gap(a: tuple[int, int], b: tuple[int, int]) -> int:
    """Distance in words between the nearest ends of two spans (adjacent spans: 1)."""
    return max(b[0] - a[1] + 1, a[0] - b[1] + 1, 0)


def read_framenet(paths: list[Path], core_elements_file: Path) -> CorpusData:
    """One example per distinct frame annotation (a block: a target and its frame elements) of a
    sentence of <= 12 words whose frame elements, core or not, are all <= 3 words long and whose
    core frame elements are all >= 2 words from the target (Kovaleva §4.2: "only the sentences
    with frame elements of 3 tokens or less", "we exclude sentences where the linked objects are
    less than two tokens apart"); its links go from the target (lexical unit) to each core frame
    element. A sentence annotated with
    several frames gives several examples."""
    try:
        core = {frame: set(names) for frame, names in json.loads(read_text(core_elements_file)).items()}
    except json.JSONDecodeError as error:
        raise CorpusError(f"{core_elements_file}: not valid JSON ({error})") from error
    # an annotation found twice (the same sentence, target and elements) is one example
    annotations: dict[tuple, int] = {}
    links = []
    for path in paths:
        for block in _blocks(path):
            words = tuple(columns[1] for _, columns in block)
            if len(words) > MAX_SENTENCE_WORDS:
                continue
            target = [index for index, (_, columns) in enumerate(block) if columns[2] != "_"]
            if not target:
                raise CorpusError(f"{path}, line {block[0][0]}: block without a target (lexical unit) token")
            frame, unit = block[target[0]][1][3], block[target[0]][1][2]
            target_span = (min(target), max(target) + 1)
            spans = _spans([columns[4] for _, columns in block])
            elements = [
                (name, start, end, _gap(target_span, (start, end)))
                for name, start, end in spans
                if name in core.get(frame, ())
            ]
            # the length limit holds for every frame element, core or not; the distance for the linked ones
            passes = all(end - start <= MAX_ELEMENT_WORDS for _, start, end in spans) and all(
                distance >= MIN_LINK_DISTANCE for *_, distance in elements
            )
            key = (words, frame, unit, target_span, tuple(elements))
            if not elements or not passes or key in annotations:
                continue
            example_id = annotations[key] = len(annotations)
            links += [(example_id, frame, unit, *target_span, *element) for element in elements]
    if not links:
        raise CorpusError(f"{paths[0]}: no FrameNet annotation passes the filters in sentences of <= 12 words")
    word_rows = [
        (example_id, 0, index, word)
        for (words, *_), example_id in annotations.items()
        for index, word in enumerate(words)
    ]
    words = pl.DataFrame(
        word_rows,
        schema={"example_id": pl.Int32, "segment": pl.Int8, "word_index": pl.Int32, "word": pl.String},
        orient="row",
    )
    texts, words = join_words(words)
    texts = texts.with_columns(source_ref=pl.lit("framenet:") + pl.col("example_id").cast(pl.String))
    frame_links = pl.DataFrame(
        links,
        schema={
            "example_id": pl.Int32,
            "frame": pl.String,
            "lexical_unit": pl.String,
            "target_start": pl.Int32,
            "target_end": pl.Int32,
            "element": pl.String,
            "element_start": pl.Int32,
            "element_end": pl.Int32,
            "distance": pl.Int32,
        },
        orient="row",
    )
    return CorpusData(
        texts=texts.select("example_id", "source_ref", "text_a", "text_b"),
        words=words,
        annotations={"frame_links": frame_links},
    )
