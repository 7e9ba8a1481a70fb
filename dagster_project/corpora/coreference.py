"""Coreference corpora: OntoGUM (CoNLL-U, `Entity=` brackets in MISC), generic CoNLL-2012
(brackets in the last column), and GAP (pronoun/candidate character offsets).

OntoGUM and CoNLL-2012 are read as whole documents; `window_documents` then cuts each
document into consecutive-sentence windows of at most max_len pieces for one tokenizer,
keeping the mentions that lie inside a window.

A mention's type (pronoun, proper, nominal) comes from its head word's POS (UPOS, or the UPOS
of its PTB tag). Where the corpus has no POS (LitBank's CoNLL-2012 files have `_`), it comes
from the word itself (`word_mention_type`): a pronoun of `PRONOUNS`, else proper when the word
is capitalized where capitals are not forced (inside a sentence, or a sentence-initial form the
document also capitalizes inside a sentence), else nominal.
"""

import re
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl
from transformers import PreTrainedTokenizerBase

from dagster_project.corpora.base import (
    WORDS_SCHEMA,
    CorpusData,
    CorpusError,
    join_words,
    read_lines,
    read_tsv,
    split_words,
)
from dagster_project.corpora.conllu_corpora import PTB_TO_UPOS, read_sentences, surface_words, tree_problem

# One bracket of a coreference column: "(12", "12)", "(12)"; CorefUD-style extras after
# the id ("(e3-person-1-3[1/2]") are allowed, and a "[k/n]" marks part k of n of a
# discontinuous mention.
_ID = r"[A-Za-z]*\d+"
_PART = r"\[\d+/\d+\]"
_BRACKET = re.compile(
    rf"\((?P<single>{_ID})[^()|\[]*(?P<part>{_PART})?\)"  # (12)
    rf"|\((?P<open>{_ID})[^()|\[]*(?P<open_part>{_PART})?(?=\(|\||$)"  # (12
    rf"|(?P<close>{_ID})(?:{_PART})?\)"  # 12)
)
# English pronoun head words (personal, possessive, reflexive, demonstrative) -> (number,
# gender, person); None is unknown. The mention types and the rule-based baseline's agreement
# sieve both read it.
PRONOUNS: dict[str, tuple[str | None, str | None, int | None]] = {
    **dict.fromkeys(("i", "me", "my", "mine", "myself"), ("singular", None, 1)),
    **dict.fromkeys(("we", "us", "our", "ours", "ourselves"), ("plural", None, 1)),
    **dict.fromkeys(("you", "your", "yours"), (None, None, 2)),
    "yourself": ("singular", None, 2),
    "yourselves": ("plural", None, 2),
    **dict.fromkeys(("he", "him", "his", "himself"), ("singular", "masculine", 3)),
    **dict.fromkeys(("she", "her", "hers", "herself"), ("singular", "feminine", 3)),
    **dict.fromkeys(("it", "its", "itself"), ("singular", "neuter", 3)),
    **dict.fromkeys(("they", "them", "their", "theirs", "themselves"), ("plural", None, 3)),
    **dict.fromkeys(("this", "that"), ("singular", None, 3)),
    **dict.fromkeys(("these", "those"), ("plural", None, 3)),
}
MENTION_COLUMNS = (
    "mention_id",
    "cluster_id",
    "word_start",
    "word_end",
    "head_word",
    "mention_type",
    "is_discontinuous",
)


@dataclass
class Document:
    """One document: words with their UPOS and head (document word index) and coref tags."""

    name: str
    path: Path
    words: list[str] = field(default_factory=list)
    upos: list[str | None] = field(default_factory=list)
    xpos: list[str | None] = field(default_factory=list)  # PTB tag (number of nouns for the sieve baseline)
    heads: list[int | None] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)  # the bracket string of each word, "" if none
    lines: list[int] = field(default_factory=list)  # source line of each word, for errors
    sentence_starts: list[int] = field(default_factory=list)


def parse_mentions(document: Document, strict: bool = True) -> tuple[list[tuple[str, int, int, bool]], list[str]]:
    """(cluster, first word, end word exclusive, discontinuous) of every bracketed mention,
    and the unbalanced brackets found: an error when strict, else skipped and listed."""
    path = document.path
    open_mentions: dict[str, list[int]] = {}
    parts: dict[str, list[tuple[int, int]]] = {}
    mentions = []

    def finish(cluster: str, start: int, end: int, part: str | None) -> None:
        if part is None:
            mentions.append((cluster, start, end, False))
            return
        index, total = map(int, part.strip("[]").split("/"))
        pieces = parts.setdefault(cluster, [])
        pieces.append((start, end))
        if index == total:
            mentions.append((cluster, pieces[0][0], pieces[-1][1], True))
            del parts[cluster]

    open_parts: dict[str, list[str | None]] = {}
    problems: list[str] = []

    def unbalanced(message: str) -> None:
        if strict:
            raise CorpusError(message)
        problems.append(message)

    for position, tag in enumerate(document.tags):
        for match in _BRACKET.finditer(tag):
            if match["single"]:
                finish(match["single"], position, position + 1, match["part"])
            elif match["open"]:
                open_mentions.setdefault(match["open"], []).append(position)
                open_parts.setdefault(match["open"], []).append(match["open_part"])
            else:
                cluster = match["close"]
                if not open_mentions.get(cluster):
                    unbalanced(
                        f"{path}, line {document.lines[position]}: coreference bracket '{cluster})' "
                        "closes a mention that was never opened"
                    )
                    continue
                finish(cluster, open_mentions[cluster].pop(), position + 1, open_parts[cluster].pop())
    for cluster, starts in open_mentions.items():
        for start in starts:
            unbalanced(
                f"{path}, line {document.lines[start]}: coreference bracket '({cluster}' "
                f"is never closed in document {document.name}"
            )
    return sorted(mentions, key=lambda mention: (mention[1], -mention[2])), problems


def mention_head(document: Document, start: int, end: int) -> int:
    """The word of the span whose head lies outside it; the last word without a tree."""
    inside = range(start, end)
    for position in inside:
        head = document.heads[position]
        if head is not None and head not in inside:
            return position
    return end - 1


def pos_upos(upos: str | None, xpos: str | None) -> str | None:
    """The word's UPOS, else that of its PTB tag; None when the corpus gives neither ('_', '-')."""
    if upos not in (None, "_"):
        return upos
    return PTB_TO_UPOS.get(xpos or "")


def mention_type(upos: str | None) -> str:
    return {"PRON": "pronoun", "PROPN": "proper"}.get(upos or "", "nominal")


def capitalized_inside_sentences(document: Document) -> set[str]:
    """The capitalized words of the document that occur somewhere other than a sentence's start."""
    starts = set(document.sentence_starts)
    return {word for index, word in enumerate(document.words) if index not in starts and word[:1].isupper()}


def word_mention_type(word: str, sentence_initial: bool, capitalized: set[str]) -> str:
    """The type of a mention whose head word has no POS, from the word itself."""
    if word.lower() in PRONOUNS:
        return "pronoun"
    if word[:1].isupper() and (not sentence_initial or word in capitalized):
        return "proper"
    return "nominal"


def mention_type_source(mentions: pl.DataFrame) -> str:
    """Where a corpus's `coref_mentions.mention_type` came from: GAP's roles, the POS column, or
    the words (see the module docstring)."""
    if "role" in mentions.columns and mentions["role"].null_count() < mentions.height:
        return "GAP roles (pronoun, name candidates)"
    if "head_xpos" in mentions.columns and mentions["head_xpos"].null_count() < mentions.height:
        return "POS column (UPOS, else the PTB tag's UPOS)"
    return "the head word (pronoun list, capitalization): the corpus has no POS"


def documents_to_corpus(
    documents: list[Document], path: Path, strict: bool, problems: list[str] | None = None
) -> CorpusData:
    """Document-level texts, words, mentions and sentence boundaries; `problems` (what the
    reader skipped) come first in the corpus's problems."""
    if not documents:
        raise CorpusError(f"{path}: no documents")
    words, mentions, sentences, texts = [], [], [], []
    problems = list(problems or [])
    for example_id, document in enumerate(documents):
        capitalized = capitalized_inside_sentences(document)
        sentence_starts = set(document.sentence_starts)
        texts.append((example_id, document.name, " ".join(document.words)))
        offset = 0
        for index, word in enumerate(document.words):
            words.append((example_id, 0, index, word, offset, offset + len(word)))
            offset += len(word) + 1
        parsed, found = parse_mentions(document, strict)
        problems += found
        for mention_id, (cluster, start, end, discontinuous) in enumerate(parsed):
            head = mention_head(document, start, end)
            upos = pos_upos(document.upos[head], document.xpos[head])
            kind = (
                mention_type(upos)
                if upos
                else word_mention_type(document.words[head], head in sentence_starts, capitalized)
            )
            mentions.append(
                (
                    example_id,
                    mention_id,
                    cluster,
                    start,
                    end,
                    head,
                    kind,
                    discontinuous,
                    document.xpos[head] if upos else None,
                )
            )
        bounds = [*document.sentence_starts, len(document.words)]
        sentences += [(example_id, index, bounds[index], bounds[index + 1]) for index in range(len(bounds) - 1)]
    return CorpusData(
        texts=pl.DataFrame(
            texts, schema={"example_id": pl.Int32, "source_ref": pl.String, "text_a": pl.String}, orient="row"
        ).with_columns(text_b=pl.lit(None, dtype=pl.String)),
        words=pl.DataFrame(words, schema=WORDS_SCHEMA, orient="row"),
        annotations={
            "coref_mentions": pl.DataFrame(
                mentions,
                schema={
                    "example_id": pl.Int32,
                    **dict(
                        zip(MENTION_COLUMNS, (pl.Int32, pl.String, pl.Int32, pl.Int32, pl.Int32, pl.String, pl.Boolean))
                    ),
                    "head_xpos": pl.String,
                },
                orient="row",
            ),
            "sentences": pl.DataFrame(
                sentences,
                schema={
                    "example_id": pl.Int32,
                    "sentence_index": pl.Int32,
                    "word_start": pl.Int32,
                    "word_end": pl.Int32,
                },
                orient="row",
            ),
        },
        problems=problems,
    )


def read_ontogum(paths: list[Path], strict: bool = True) -> CorpusData:
    """OntoGUM CoNLL-U files; every `# newdoc` (or file) starts a document. With
    strict=False an unbalanced bracket, or a sentence whose tree is malformed (`tree_problem`),
    is skipped and listed in `problems`."""
    documents: list[Document] = []
    skipped: list[str] = []
    for path in paths:
        for sentence in read_sentences(path):
            if "newdoc id" in sentence.tokens.metadata or not documents:
                documents.append(Document(name=sentence.tokens.metadata.get("newdoc id", path.stem), path=path))
            document = documents[-1]
            problem = tree_problem(path, sentence)
            if problem:
                if strict:
                    raise CorpusError(problem)
                skipped.append(f"{problem}; sentence skipped")
                continue
            base = len(document.words)
            document.sentence_starts.append(base)
            words, surface_of = surface_words(sentence.tokens)
            document.words += words
            document.upos += [None] * len(words)
            document.xpos += [None] * len(words)
            document.heads += [None] * len(words)
            document.tags += [""] * len(words)
            document.lines += [0] * len(words)
            for token, line in zip(sentence.tokens, sentence.lines):
                if not isinstance(token["id"], int):
                    continue
                position = base + surface_of[token["id"]]
                head = token["head"]
                # A multiword token keeps the syntactic word whose head lies outside it.
                if document.upos[position] is None or (head and surface_of[head] + base != position):
                    document.upos[position] = token["upos"]
                    document.xpos[position] = None if token["xpos"] == "_" else token["xpos"]
                    document.heads[position] = surface_of[head] + base if head else None
                document.tags[position] += (token["misc"] or {}).get("Entity", "") or ""
                document.lines[position] = line
    return documents_to_corpus(documents, paths[0], strict, skipped)


def read_conll2012(path: Path, strict: bool = True) -> CorpusData:
    """CoNLL-2012 `*_conll` files: word in column 4, PTB POS in column 5 ('_' or '-': none),
    coreference last.

    There is no dependency tree, so a mention's head word is its last word.
    """
    documents: list[Document] = []
    sentence_open = False
    for number, line in enumerate(read_lines(path), start=1):
        text = line.strip()
        if text.startswith("#begin document"):
            documents.append(Document(name=text.removeprefix("#begin document").strip(), path=path))
            sentence_open = False
            continue
        if text.startswith("#end document") or text.startswith("#"):
            continue
        if not text:
            sentence_open = False
            continue
        columns = text.split()
        if not documents:
            raise CorpusError(f"{path}, line {number}: word line before any '#begin document'")
        if len(columns) < 12:
            raise CorpusError(
                f"{path}, line {number}: expected at least 12 whitespace-separated CoNLL-2012 columns, "
                f"found {len(columns)}"
            )
        document = documents[-1]
        if not sentence_open:
            document.sentence_starts.append(len(document.words))
            sentence_open = True
        document.words.append(columns[3])
        document.upos.append(None)
        document.xpos.append(None if columns[4] in ("_", "-") else columns[4])
        document.heads.append(None)
        document.tags.append("" if columns[-1] == "-" else columns[-1])
        document.lines.append(number)
    return documents_to_corpus(documents, path, strict)


def _word_pieces(words: pl.DataFrame, tokenizer: PreTrainedTokenizerBase) -> pl.DataFrame:
    """`words` with n_pieces, each word's word-piece count on its own."""
    pieces = tokenizer(words["word"].to_list(), add_special_tokens=False, split_special_tokens=True, verbose=False)[
        "input_ids"
    ]
    return words.with_columns(n_pieces=pl.Series([len(ids) for ids in pieces], dtype=pl.Int32))


def truncate_documents(data: CorpusData, tokenizer: PreTrainedTokenizerBase, max_len: int) -> CorpusData:
    """Cut each document to its first max_len pieces (Clark §4.3, footnote 4: "We truncate
    documents to 128 tokens long"): its words while they and the special tokens fit, whole words
    only; mentions that do not end inside the kept words are dropped."""
    special = tokenizer.num_special_tokens_to_add(pair=False)
    words = _word_pieces(data.words.sort("example_id", "word_index"), tokenizer)
    kept = words.filter(pl.col("n_pieces").cum_sum().over("example_id") + special <= max_len)
    texts, new_words = join_words(kept.select("example_id", "segment", "word_index", "word"))
    ends = kept.group_by("example_id").agg(kept_words=pl.col("word_index").max() + 1)
    mentions = (
        data.annotations["coref_mentions"]
        .join(ends, on="example_id")
        .filter(pl.col("word_end") <= pl.col("kept_words"))
        .drop("kept_words")
    )
    texts = texts.join(data.texts.select("example_id", "source_ref"), on="example_id").select(
        "example_id", "source_ref", "text_a", "text_b", group_id="example_id"
    )
    return CorpusData(
        texts=texts.sort("example_id"),
        words=new_words,
        annotations={"coref_mentions": mentions, "coref_clusters": clusters_of(mentions)},
        problems=data.problems,
    )


def prepare_documents(data: CorpusData, tokenizer: PreTrainedTokenizerBase, max_len: int, overlong: str) -> CorpusData:
    """Documents longer than max_len pieces as `overlong` says: "truncate" (the default of the
    coreference corpora, the paper's) keeps each one's first max_len pieces, "windows" cuts each
    into sentence windows (more mentions, not the paper's), "drop" leaves them whole, so that
    encoding drops those that do not fit."""
    if overlong == "truncate":
        return truncate_documents(data, tokenizer, max_len)
    if overlong == "windows":
        return window_documents(data, tokenizer, max_len)
    return data


def window_documents(data: CorpusData, tokenizer: PreTrainedTokenizerBase, max_len: int) -> CorpusData:
    """Cut documents into windows of whole consecutive sentences of at most max_len pieces.

    A window becomes an example (group_id = the document); mentions crossing a window
    edge are dropped. A single sentence longer than max_len stays alone in its window
    (encoding then drops it as too long).
    """
    words = _word_pieces(data.words.sort("example_id", "word_index"), tokenizer)
    special = tokenizer.num_special_tokens_to_add(pair=False)
    sentences = (
        data.annotations["sentences"]
        .join(words.group_by("example_id").agg(pl.col("n_pieces")), on="example_id")
        .sort("example_id", "sentence_index")
    )
    rows = []
    window_id = 0
    for document, frame in sentences.group_by("example_id", maintain_order=True):
        used = 0
        piece_counts = frame["n_pieces"][0].to_numpy()
        for start, end in frame.select("word_start", "word_end").iter_rows():
            size = int(piece_counts[start:end].sum())
            if used and used + size + special > max_len:
                window_id += 1
                used = 0
            rows.append((document[0], start, end, window_id))
            used += size
        window_id += 1
    windows = pl.DataFrame(
        rows,
        schema={"document": pl.Int32, "word_start": pl.Int32, "word_end": pl.Int32, "window": pl.Int32},
        orient="row",
    )
    spans = windows.group_by("document", "window").agg(pl.col("word_start").min(), pl.col("word_end").max())
    word_windows = words.join(spans, left_on="example_id", right_on="document").filter(
        (pl.col("word_index") >= pl.col("word_start")) & (pl.col("word_index") < pl.col("word_end"))
    )
    texts, new_words = join_words(
        word_windows.select(
            example_id="window", segment="segment", word_index=pl.col("word_index") - pl.col("word_start"), word="word"
        )
    )
    documents = spans.select(example_id="window", group_id="document").join(
        data.texts.select(group_id="example_id", source_ref="source_ref"), on="group_id"
    )
    texts = (
        texts.join(documents, on="example_id")
        .sort("example_id")
        .with_columns(
            source_ref=pl.col("source_ref")
            + pl.lit(" window ")
            + pl.int_range(pl.len()).over("group_id").cast(pl.String)
        )
        .select("example_id", "source_ref", "text_a", "text_b", "group_id")
    )
    joined = (
        data.annotations["coref_mentions"]
        .join(
            spans.rename({"word_start": "window_start", "word_end": "window_end"}),
            left_on="example_id",
            right_on="document",
        )
        .filter((pl.col("word_start") >= pl.col("window_start")) & (pl.col("word_end") <= pl.col("window_end")))
    )
    shift = pl.col("window_start")
    new_mentions = joined.select(
        example_id="window",
        mention_id="mention_id",
        cluster_id="cluster_id",
        word_start=pl.col("word_start") - shift,
        word_end=pl.col("word_end") - shift,
        head_word=pl.col("head_word") - shift,
        mention_type="mention_type",
        is_discontinuous="is_discontinuous",
        head_xpos="head_xpos",
    )
    return CorpusData(
        texts=texts.sort("example_id"),
        words=new_words,
        annotations={"coref_mentions": new_mentions, "coref_clusters": clusters_of(new_mentions)},
        problems=data.problems,
    )


def clusters_of(mentions: pl.DataFrame) -> pl.DataFrame:
    """One row per (example, cluster): how many mentions it has there and where it starts."""
    return (
        mentions.group_by("example_id", "cluster_id")
        .agg(n_mentions=pl.len().cast(pl.Int32), first_word=pl.col("word_start").min())
        .sort("example_id", "first_word")
    )


def read_gap(path: Path) -> CorpusData:
    """GAP rows: the pronoun and candidates A and B as mentions, from character offsets.

    The pronoun is cluster 'P'; a candidate whose gold flag is TRUE joins it, otherwise it
    is its own cluster ('A' or 'B').
    """
    frame = read_tsv(
        path, ["ID", "Text", "Pronoun", "Pronoun-offset", "A", "A-offset", "A-coref", "B", "B-offset", "B-coref"]
    )
    if frame.is_empty():
        raise CorpusError(f"{path}: no rows")
    texts = frame.select(
        example_id=pl.int_range(pl.len(), dtype=pl.Int32),
        source_ref="ID",
        text_a="Text",
        text_b=pl.lit(None, dtype=pl.String),
    )
    words = split_words(texts)
    rows = []
    for role, text_column, offset_column, flag_column in (
        ("pronoun", "Pronoun", "Pronoun-offset", None),
        ("A", "A", "A-offset", "A-coref"),
        ("B", "B", "B-offset", "B-coref"),
    ):
        offsets = frame[offset_column].cast(pl.Int32, strict=False)
        bad = offsets.is_null().arg_true()
        if len(bad):
            raise CorpusError(
                f"{path}, line {bad[0] + 2}: {offset_column} {frame[offset_column][bad[0]]!r} is not a character offset"
            )
        flags = frame[flag_column].str.to_uppercase() == "TRUE" if flag_column else pl.Series([True] * frame.height)
        rows.append(
            pl.DataFrame(
                {
                    "example_id": texts["example_id"],
                    "role": role,
                    "char_start": offsets,
                    "char_end": offsets + frame[text_column].str.len_chars().cast(pl.Int32),
                    "gold_coref": flags,
                }
            )
        )
    spans = pl.concat(rows)
    # A mention covers the words its characters overlap.
    covered = spans.join(
        words.select("example_id", "word_index", word_start_char="char_start", word_end_char="char_end"),
        on="example_id",
    ).filter((pl.col("word_start_char") < pl.col("char_end")) & (pl.col("word_end_char") > pl.col("char_start")))
    mentions = covered.group_by("example_id", "role", "gold_coref").agg(
        word_start=pl.col("word_index").min(), word_end=pl.col("word_index").max() + 1
    )
    missing = spans.join(mentions, on=["example_id", "role"], how="anti")
    if missing.height:
        row = missing.row(0, named=True)
        raise CorpusError(
            f"{path}, line {row['example_id'] + 2}: {row['role']} offset {row['char_start']} lies outside the text"
        )
    mentions = (
        mentions.with_columns(
            mention_id=pl.col("role").replace_strict({"pronoun": 0, "A": 1, "B": 2}, return_dtype=pl.Int32),
            cluster_id=pl.when(pl.col("role") == "pronoun")
            .then(pl.lit("P"))
            .when(pl.col("gold_coref"))
            .then(pl.lit("P"))
            .otherwise(pl.col("role")),
            head_word=pl.col("word_end") - 1,
            mention_type=pl.when(pl.col("role") == "pronoun").then(pl.lit("pronoun")).otherwise(pl.lit("proper")),
            is_discontinuous=pl.lit(False),
        )
        .select("example_id", *MENTION_COLUMNS, "role", "gold_coref")
        .sort("example_id", "mention_id")
    )
    return CorpusData(
        texts=texts, words=words, annotations={"coref_mentions": mentions, "coref_clusters": clusters_of(mentions)}
    )


def gap_files(split: str) -> str:
    return f"gap_coreference/gap-{split}.tsv"


def ontogum_files(data_dir: Path) -> list[Path]:
    folder = data_dir / "gum_coref" / "ontogum_conllu"
    files = sorted(folder.glob("*.conllu"))
    if not files:
        raise CorpusError(
            f"No OntoGUM .conllu files in {folder}; set ATTN_DATA_DIR to a folder laid out like ../shared/data."
        )
    return files
