"""CoNLL-U corpora (UD English EWT/GUM): surface words, gold UPOS/XPOS, heads and relations.

Multiword tokens ("don't" = do + n't) are read as their surface word, and both syntactic
words map to it; empty nodes (8.1) are skipped. Every malformed line is reported with the
file and line number, and every malformed tree (a head outside the sentence, no root or two,
a cycle) with the file, line and sentence id (`tree_problem`). A word without UPOS ('_', as in
files converted from the Penn Treebank) gets the UPOS of its PTB tag (`PTB_TO_UPOS`); without
either the file is refused (`word_upos`).
"""

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import conllu
import polars as pl
from conllu.exceptions import ParseException

from dagster_project.corpora.base import CorpusData, CorpusError, join_words, read_lines

# Penn Treebank tag -> UPOS, the usual conversion (UD EWT's pairs; an ambiguous tag takes its most
# frequent UPOS: MD -> AUX, TO -> PART, IN -> ADP, WDT -> DET).
PTB_TO_UPOS = {
    **dict.fromkeys(("''", "``", ",", ".", ":", "-LRB-", "-RRB-", "HYPH", "NFP"), "PUNCT"),
    **dict.fromkeys(("#", "$", "SYM"), "SYM"),
    **dict.fromkeys(("JJ", "JJR", "JJS", "AFX"), "ADJ"),
    **dict.fromkeys(("NN", "NNS"), "NOUN"),
    **dict.fromkeys(("NNP", "NNPS"), "PROPN"),
    **dict.fromkeys(("PRP", "PRP$", "WP", "WP$", "EX"), "PRON"),
    **dict.fromkeys(("RB", "RBR", "RBS", "WRB"), "ADV"),
    **dict.fromkeys(("VB", "VBD", "VBG", "VBN", "VBP", "VBZ"), "VERB"),
    **dict.fromkeys(("DT", "PDT", "WDT"), "DET"),
    **dict.fromkeys(("FW", "LS", "ADD", "GW", "XX", "-NONE-"), "X"),
    **dict.fromkeys(("POS", "TO"), "PART"),
    **dict.fromkeys(("IN", "RP"), "ADP"),
    "CC": "CCONJ",
    "CD": "NUM",
    "MD": "AUX",
    "UH": "INTJ",
}


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
    for number, line in enumerate([*read_lines(path), "\n"], start=1):
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
                raise CorpusError(f"{path}, line {n}: expected 10 tab-separated CoNLL-U columns, found {len(columns)}")
            if "-" not in columns[0] and "." not in columns[0] and not (columns[6].isdigit() or columns[6] == "_"):
                raise CorpusError(f"{path}, line {n}: head {columns[6]!r} is not an integer word id")
        try:
            tokens = conllu.parse("".join(block))[0]
        except ParseException as error:
            raise CorpusError(f"{path}, sentence starting at line {numbers[0]}: {error}") from error
        yield Sentence(index=index, tokens=tokens, lines=token_lines)
        index += 1
        block, numbers = [], []


def tree_problem(path: Path, sentence: Sentence) -> str | None:
    """What is wrong with the sentence's dependency tree (file, line and sentence id), or None.

    The syntactic words need heads that are 0 or a word id of the sentence, exactly one root
    (head 0; relation `root` only there) and no cycle. A sentence without any head ('_'
    throughout) has no tree to check.
    """
    name = sentence.tokens.metadata.get("sent_id") or f"number {sentence.index + 1} of the file"
    words = [(token, line) for token, line in zip(sentence.tokens, sentence.lines) if isinstance(token["id"], int)]
    if not words or all(token["head"] is None for token, _ in words):
        return None
    line_of = {token["id"]: line for token, line in words}
    heads: dict[int, int] = {}
    for token, line in words:
        where = f"{path}, line {line}, sentence {name}"
        word, head = f"word {token['id']} ({token['form']!r})", token["head"]
        if head is None:
            return f"{where}: {word} has no head ('_') while other words do; give it a head (0 for the root)"
        if head != 0 and head not in line_of:
            return (
                f"{where}: head {head} of {word} is outside the sentence (word ids {min(line_of)}-{max(line_of)}); "
                "set HEAD (column 7) to 0 or a word id of this sentence"
            )
        if token["deprel"] == "root" and head != 0:
            return f"{where}: {word} has relation 'root' but head {head}; a root's head must be 0"
        heads[token["id"]] = head
    roots = [word for word, head in heads.items() if head == 0]
    if len(roots) != 1:
        first = min(line_of.values()) if not roots else line_of[roots[1]]
        found = (
            "no root (no word has head 0)" if not roots else f"two roots (words {roots[0]} and {roots[1]} have head 0)"
        )
        return f"{path}, line {first}, sentence {name}: {found}; exactly one word needs head 0"
    rooted = {0}
    for start in heads:
        chain: list[int] = []
        word = start
        while word not in rooted and word not in chain:
            chain.append(word)
            word = heads[word]
        if word not in rooted:
            cycle = chain[chain.index(word) :]
            return (
                f"{path}, line {line_of[word]}, sentence {name}: dependency cycle "
                f"{' -> '.join(map(str, [*cycle, word]))} (these heads never reach the root); "
                "fix the HEAD column (7) of one of these words"
            )
        rooted.update(chain)
    return None


def word_upos(path: Path, sentence: Sentence, token: conllu.Token, line: int) -> str:
    """The word's UPOS (column 4), else the UPOS of its PTB tag (column 5); a word with neither is
    an error, since the views leave punctuation out by UPOS."""
    if token["upos"] not in (None, "_"):
        return token["upos"]
    if token["xpos"] in PTB_TO_UPOS:
        return PTB_TO_UPOS[token["xpos"]]
    name = sentence.tokens.metadata.get("sent_id") or f"number {sentence.index + 1} of the file"
    raise CorpusError(
        f"{path}, line {line}, sentence {name}: word {token['id']} ({token['form']!r}) has no UPOS ('_') and its "
        f"XPOS {token['xpos']!r} is not a Penn Treebank tag to derive it from; fill UPOS (column 4) with UD "
        "tags, or XPOS (column 5) with Penn Treebank tags"
    )


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
            problem = tree_problem(path, sentence)
            if problem:
                raise CorpusError(problem)
            example_id = offset + sentence.index
            words, surface_of = surface_words(sentence.tokens)
            word_rows["example_id"] += [example_id] * len(words)
            word_rows["word_index"] += list(range(len(words)))
            word_rows["word"] += words
            refs.append(f"{path.name}:{sentence.tokens.metadata.get('sent_id', sentence.index)}")
            for token, line in zip(sentence.tokens, sentence.lines):
                if not isinstance(token["id"], int):
                    continue
                head = token["head"]
                values = (
                    example_id,
                    token["id"],
                    surface_of[token["id"]],
                    surface_of[head] if head else None,
                    token["deprel"],
                    word_upos(path, sentence, token, line),
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
