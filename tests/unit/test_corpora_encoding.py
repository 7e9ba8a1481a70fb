"""Encoding and the word <-> piece alignment, for WordPiece, byte-level BPE and SentencePiece."""

from pathlib import Path

import polars as pl
import pytest
from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers
from transformers import AutoTokenizer, PreTrainedTokenizerFast

from dagster_project.corpora import (
    CORPORA,
    CorpusData,
    CorpusError,
    encode_corpus,
    join_words,
    read_demo_pairs,
    split_words,
)

TRAINING_TEXT = [
    "The unbelievable cat sat on the mat, didn't it?",
    "Tokenizers split words into pieces.",
] * 20


@pytest.fixture(scope="module")
def wordpiece(tiny_model_dir: Path):
    return AutoTokenizer.from_pretrained(tiny_model_dir)


def _bpe(pre_tokenizer, decoder_prefix: str) -> PreTrainedTokenizerFast:
    """A tiny BPE tokenizer with RoBERTa-style specials: <s> A </s></s> B </s>."""
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizer
    specials = ["<s>", "<pad>", "</s>", "<unk>"]
    trainer = trainers.BpeTrainer(
        vocab_size=120,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet() if decoder_prefix == "Ġ" else [],
    )
    tokenizer.train_from_iterator(TRAINING_TEXT, trainer)
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>", special_tokens=[("<s>", 0), ("</s>", 2)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token="<s>",
        cls_token="<s>",
        eos_token="</s>",
        sep_token="</s>",
        pad_token="<pad>",
        unk_token="<unk>",
    )


TOKENIZERS = {
    "byte-level BPE": lambda: _bpe(pre_tokenizers.ByteLevel(add_prefix_space=False), "Ġ"),
    "SentencePiece BPE": lambda: _bpe(pre_tokenizers.Metaspace(), "▁"),
}


def _pair(text_a: str, text_b: str | None = None) -> CorpusData:
    return CorpusData(
        texts=pl.DataFrame({"example_id": [7], "source_ref": ["x"], "text_a": [text_a], "text_b": [text_b]})
    )


def test_pairs_get_segments_and_token_classes(wordpiece):
    tokens = encode_corpus(_pair("The cat sat.", "It slept, well."), wordpiece, 64, 10, 0).tokens
    assert tokens["token"].to_list() == [
        "[CLS]",
        "the",
        "cat",
        "sat",
        ".",
        "[SEP]",
        "it",
        "slept",
        ",",
        "well",
        ".",
        "[SEP]",
    ]
    assert tokens["segment"].to_list() == [0] * 6 + [1] * 6
    assert tokens["token_class"].to_list() == [
        "cls",
        "other",
        "other",
        "other",
        "punct",
        "sep",
        "other",
        "other",
        "punct",
        "other",
        "punct",
        "sep",
    ]
    assert tokens["word_index"].to_list() == [None, 0, 1, 2, 3, None, 4, 5, 6, 7, 8, None]


def test_split_words_keeps_contractions_and_splits_punctuation():
    words = split_words(_pair("I didn't go, well-known.", "No.").texts)
    assert words["word"].to_list() == ["I", "didn't", "go", ",", "well-known", ".", "No", "."]
    assert words["segment"].to_list() == [0] * 6 + [1] * 2
    assert words.filter(pl.col("word") == "didn't")[["char_start", "char_end"]].row(0) == (2, 8)


def test_wordpiece_alignment_covers_split_words(wordpiece):
    encoded = encode_corpus(_pair("An unbelievable tokenization!"), wordpiece, 64, 10, 0)
    pieces = encoded.tokens["token"].to_list()
    for word, start, end in encoded.words.select("word", "piece_start", "piece_end").iter_rows():
        assert "".join(p.removeprefix("##") for p in pieces[start:end]) == word.lower()
    assert (
        encoded.words.filter(pl.col("word") == "tokenization")["piece_end"][0]
        - encoded.words.filter(pl.col("word") == "tokenization")["piece_start"][0]
        > 1
    )


@pytest.mark.parametrize("family", sorted(TOKENIZERS))
def test_bpe_alignment_strips_space_markers(family: str):
    tokenizer = TOKENIZERS[family]()
    encoded = encode_corpus(
        _pair("The unbelievable cat sat, didn't it?", "Tokenizers split words."), tokenizer, 128, 10, 0
    )
    pieces = encoded.tokens["token"].to_list()
    marker = "Ġ" if family.startswith("byte") else "▁"
    for word, start, end in encoded.words.select("word", "piece_start", "piece_end").iter_rows():
        assert word in "".join(pieces[start:end]).replace(marker, ""), (word, pieces[start:end])
    # A piece crossing a word boundary is shared by both words, never lost.
    if family.startswith("Sentence"):
        shared = encoded.words.filter(pl.col("word").is_in(["it", "?"]))
        assert shared["piece_start"].n_unique() == 1 and pieces[shared["piece_start"][0]] == "▁it?"
    # No token types: segments follow the separators, specials have no word.
    tokens = encoded.tokens
    assert tokens.filter(pl.col("is_special"))["word_index"].null_count() == 4
    assert tokens.filter(pl.col("word_index") == 8)["segment"].unique().to_list() == [1]  # "Tokenizers"


def test_pre_tokenized_words_keep_their_indices(wordpiece):
    words = pl.DataFrame(
        {"example_id": [3, 3, 3], "segment": [0, 0, 0], "word_index": [0, 1, 2], "word": ["Byron", "didn't", "go"]},
        schema_overrides={"segment": pl.Int8},
    )
    texts, words = join_words(words)
    assert texts["text_a"].to_list() == ["Byron didn't go"]
    encoded = encode_corpus(
        CorpusData(texts=texts.with_columns(source_ref=pl.lit("s")), words=words), wordpiece, 64, None, 0
    )
    assert encoded.words["piece_start"].to_list() == [1, 2, 5]
    assert encoded.words["piece_end"].to_list() == [2, 5, 6]


def test_encode_drops_long_examples_and_is_seeded(wordpiece):
    texts = pl.DataFrame(
        {
            "example_id": list(range(6)),
            "source_ref": [""] * 6,
            "text_a": ["short one"] * 5 + ["a much longer sentence that will not fit at all"],
            "text_b": ["b"] * 6,
        }
    )
    first = encode_corpus(CorpusData(texts), wordpiece, max_len=6, size=3, seed=1)
    again = encode_corpus(CorpusData(texts), wordpiece, max_len=6, size=3, seed=1)
    assert first.n_too_long == 1 and first.n_candidates == 6
    assert first.examples.height == 3
    assert first.examples["example_id"].to_list() == again.examples["example_id"].to_list()
    assert 5 not in first.examples["example_id"].to_list()
    assert set(first.words["example_id"]) == set(first.examples["example_id"])
    with pytest.raises(CorpusError, match="no example of 6 fits in 2 tokens"):
        encode_corpus(CorpusData(texts), wordpiece, max_len=2, size=3, seed=1)


def test_demo_corpus_encodes_whole(wordpiece):
    encoded = encode_corpus(read_demo_pairs(), wordpiece, 128, 1000, 13)
    assert encoded.examples.height == 24 and encoded.n_too_long == 0
    assert encoded.words["piece_start"].null_count() == 0


def test_truncate_cuts_the_longer_segment_and_its_text(wordpiece):
    # [CLS] 5 words [SEP] 2 words [SEP] = 10 pieces; at max_len 8 the longer segment loses its
    # last two pieces (longest_first), so text_a keeps "one two three" and its three words.
    texts = pl.DataFrame(
        {
            "example_id": [0, 1],
            "source_ref": ["", ""],
            "text_a": ["one two three four five", "short"],
            "text_b": ["six seven", "pair"],
        }
    )
    cut = encode_corpus(CorpusData(texts), wordpiece, max_len=8, size=None, seed=0, overlong="truncate")
    assert cut.n_too_long == 1 and cut.n_truncated == 1 and cut.examples.height == 2
    first = cut.tokens.filter(pl.col("example_id") == 0)
    assert first["token"].to_list() == ["[CLS]", "one", "two", "three", "[SEP]", "six", "seven", "[SEP]"]
    assert first["segment"].to_list() == [0] * 5 + [1] * 3
    example = cut.examples.filter(pl.col("example_id") == 0)
    assert example.select("text_a", "text_b", "n_tokens", "truncated_from", "overlong").row(0) == (
        "one two three",
        "six seven",
        8,
        10,
        "truncate",
    )
    assert cut.examples.filter(pl.col("example_id") == 1)["truncated_from"].to_list() == [None]
    words = cut.words.filter(pl.col("example_id") == 0)
    assert words["word"].to_list() == ["one", "two", "three", "six", "seven"]
    assert words["piece_start"].to_list() == [1, 2, 3, 5, 6]
    # The same corpus under `drop` keeps only the example that fits.
    dropped = encode_corpus(CorpusData(texts), wordpiece, max_len=8, size=None, seed=0)
    assert dropped.examples["example_id"].to_list() == [1] and dropped.n_truncated == 0
    with pytest.raises(ValueError, match="overlong must be one of"):
        encode_corpus(CorpusData(texts), wordpiece, max_len=8, size=None, seed=0, overlong="cut")


def test_glue_pairs_over_max_len_are_truncated_by_default(wordpiece, tmp_path: Path):
    # a BERT classifier truncates: the 200-word premise is cut to fit 128 pieces, not dropped
    spec = CORPORA["glue_rte"]
    tsv = tmp_path / "glue" / "glue_style_tsv" / "RTE" / "dev.tsv"
    tsv.parent.mkdir(parents=True)
    tsv.write_text("index\tsentence1\tsentence2\tlabel\n0\t" + "a " * 200 + "\tb\tentailment\n1\ta\tb\tentailment\n")
    encoded = encode_corpus(spec.read(tmp_path), wordpiece, spec.max_len, spec.size, spec.seed, spec.overlong)
    assert (encoded.examples.height, encoded.n_too_long, encoded.n_truncated) == (2, 1, 1)
    # [CLS] 200 x a [SEP] b [SEP] = 204 pieces, cut to 128: the premise keeps 128 - 4 = 124 of its words
    long = encoded.examples.filter(pl.col("example_id") == 0)
    assert long.select("n_tokens", "truncated_from", "overlong").row(0) == (128, 204, "truncate")
    assert encoded.words.filter(pl.col("example_id") == 0, pl.col("segment") == 0).height == 124
