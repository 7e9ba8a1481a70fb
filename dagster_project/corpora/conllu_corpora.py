"""CoNLL-U corpora (UD English EWT/GUM): surface words, gold UPOS/XPOS, heads and relations.

Multiword tokens ("don't" = do + n't) are read as their surface word, and both syntactic
words map to it; empty nodes (8.1) are skipped. Every malformed line is reported with the
file and line number.
"""

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import conllu
import polars as pl
from conllu.exceptions import ParseException

from dagster_project.corpora.base import CorpusData, CorpusError, join_words, require_file


@dataclass(frozen=True)
class Sentence:
    """One CoNLL-U sentence with the line number of each token line."""

    index: int
    tokens: conllu.TokenList
    lines: list[int]


def read_sentences(path: Path) -> Iterator[Sentence]:
    """Sentences of a CoNLL-U file, checked line by line (10 columns, integer heads)."""
    block: list[str] = []
    numbers: list[int] = []
    index = 0
    with require_file(path).open(encoding="utf-8") as lines:
        for number, line in enumerate([*lines, "\n"], start=1):
            if line.strip():
                block.append(line)
                numbers.append(number)
                continue
            if not block:
                continue
            token_lines = [n for text, n in zip(block, numbers) if not text.startswith("#")]
            if not token_lines:  # a comment-only block (e.g. document metadata)
                block, numbers = [], []
                continue
            for text, n in zip(block, numbers):
                if text.startswith("#"):
                    continue
                columns = text.rstrip("\n").split("\t")
                if len(columns) != 10:
                    raise CorpusError(
                        f"{path}, line {n}: expected 10 tab-separated CoNLL-U columns, found {len(columns)}"
                    )
                if "-" not in columns[0] and "." not in columns[0] and not (columns[6].isdigit() or columns[6] == "_"):
                    raise CorpusError(f"{path}, line {n}: head {columns[6]!r} is not an integer word id")
            try:
                tokens = conllu.parse("".join(block))[0]
            except ParseException as error:
                raise CorpusError(f"{path}, sentence starting at line {numbers[0]}: {error}") from error
            yield Sentence(index=index, tokens=tokens, lines=token_lines)
            index += 1
            block, numbers = [], []


def surface_words(sentence: conllu.TokenList) -> tuple[list[str], dict[int, int]]:
    """Surface words (a multiword token counts once) and syntactic word id -> surface index."""
    words: list[str] = []
    surface_of: dict[int, int] = {}
    covered_until = 0
    for token in sentence:
        token_id = token["id"]
        if isinstance(token_id, tuple):
            if token_id[1] == "-":  # multiword range: its form is the surface word
                covered_until = token_id[2]
                for word_id in range(token_id[0], token_id[2] + 1):
                    surface_of[word_id] = len(words)
                words.append(token["form"])
            continue  # empty nodes (decimal ids) are not words of the text
        if token_id > covered_until:
            surface_of[token_id] = len(words)
            words.append(token["form"])
    return words, surface_of


def read_ud(paths: list[Path]) -> CorpusData:
    """UD treebank files as one corpus: example_id counts sentences across the files."""
    word_rows: dict[str, list] = {"example_id": [], "word_index": [], "word": []}
    dependency_rows: dict[str, list] = {
        name: []
        for name in ("example_id", "ud_id", "word_index", "head_word_index", "relation", "upos", "xpos", "form")
    }
    refs: list[str] = []
    offset = 0
    for path in paths:
        count = 0
        for sentence in read_sentences(path):
            example_id = offset + sentence.index
            words, surface_of = surface_words(sentence.tokens)
            word_rows["example_id"] += [example_id] * len(words)
            word_rows["word_index"] += list(range(len(words)))
            word_rows["word"] += words
            refs.append(f"{path.name}:{sentence.tokens.metadata.get('sent_id', sentence.index)}")
            for token in sentence.tokens:
                if not isinstance(token["id"], int):
                    continue
                head = token["head"]
                values = (
                    example_id,
                    token["id"],
                    surface_of[token["id"]],
                    surface_of[head] if head else None,
                    token["deprel"],
                    token["upos"],
                    token["xpos"],
                    token["form"],
                )
                for name, value in zip(dependency_rows, values):
                    dependency_rows[name].append(value)
            count += 1
        if count == 0:
            raise CorpusError(f"{path}: no sentences")
        offset += count
    words = pl.DataFrame(
        word_rows, schema={"example_id": pl.Int32, "word_index": pl.Int32, "word": pl.String}
    ).with_columns(segment=pl.lit(0, dtype=pl.Int8))
    texts, words = join_words(words)
    texts = texts.with_columns(source_ref=pl.Series(refs)).select("example_id", "source_ref", "text_a", "text_b")
    dependencies = pl.DataFrame(
        dependency_rows,
        schema={
            "example_id": pl.Int32,
            "ud_id": pl.Int16,
            "word_index": pl.Int32,
            "head_word_index": pl.Int32,
            "relation": pl.String,
            "upos": pl.String,
            "xpos": pl.String,
            "form": pl.String,
        },
    )
    return CorpusData(texts=texts, words=words, annotations={"dependencies": dependencies})
