"""A corpus's warehouse rows for one model's tokenizer: read from its files, prepared, encoded
and, where the corpus asks for it, annotated with spaCy."""

import logging
from dataclasses import dataclass
from pathlib import Path

import polars as pl
from transformers import PreTrainedTokenizerBase

from dagster_project.corpora.annotation import spacy_features
from dagster_project.corpora.base import CorpusSpec
from dagster_project.corpora.encoding import EncodedCorpus, encode_corpus

MALFORMED_LOGGED = 20  # skipped inputs named in the log; all are counted


@dataclass(frozen=True)
class CorpusTables:
    """One corpus encoded for one model, as the warehouse takes it."""

    tables: dict[str, pl.DataFrame]  # examples, tokens, words, the gold annotations (and word_features)
    encoded: EncodedCorpus
    n_malformed: int  # inputs the reader skipped
    # what encoding did with examples over max_len: the run's overlong, or drop for documents the
    # corpus's `prepare` already cut
    encoding_overlong: str


def corpus_tables(
    spec: CorpusSpec,
    data_dir: Path,
    tokenizer: PreTrainedTokenizerBase,
    max_len: int,
    size: int | None,
    seed: int,
    overlong: str,
    log: logging.Logger,
) -> CorpusTables:
    """The corpus's rows for `tokenizer`, sampled as `encode_corpus` does; `examples` records
    max_len and seed. Skipped inputs, what was kept and the spaCy annotation go to `log`."""
    data = spec.read(data_dir)
    for problem in data.problems[:MALFORMED_LOGGED]:
        log.warning(f"{spec.name}: skipped malformed input: {problem}")
    if spec.prepare:  # the documents are cut as `overlong` says; encoding drops what still does not fit
        data = spec.prepare(data, tokenizer, max_len, overlong)
    encoding_overlong = "drop" if spec.prepare else overlong
    encoded = encode_corpus(data, tokenizer, max_len, size, seed, encoding_overlong)
    log.info(
        f"{spec.name}: kept {encoded.examples.height} of {encoded.n_candidates} candidates "
        f"({encoded.n_too_long} longer than {max_len} tokens, overlong={overlong}: "
        f"{encoded.n_truncated} kept truncated)"
    )
    tables = {
        "examples": encoded.examples.with_columns(max_len=max_len, seed=seed, overlong=pl.lit(overlong)),
        "tokens": encoded.tokens,
        "words": encoded.words,
        **encoded.annotations,
    }
    if spec.spacy_features:
        log.info(f"{spec.name}: annotating {encoded.words.height} words with spaCy")
        tables["word_features"] = spacy_features(encoded.examples, encoded.words)
    return CorpusTables(tables, encoded, len(data.problems), encoding_overlong)
