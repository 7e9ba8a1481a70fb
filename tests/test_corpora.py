"""Corpus readers and encoding, on small fixtures the tests write themselves."""

from pathlib import Path

import polars as pl
import pytest
from transformers import AutoTokenizer

from dagster_project.corpora import CORPORA, CorpusError, detokenize_wikitext, encode_corpus, read_demo_pairs, read_wikitext_pairs, read_xnli_pairs


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir: Path):
    return AutoTokenizer.from_pretrained(tiny_model_dir)


def test_detokenize_wikitext():
    raw = "He had a guest @-@ starring role , in 2,000 @,@ 5 @.@ 5 ( the Bill ) . It 's fine"
    assert detokenize_wikitext(raw) == "He had a guest-starring role, in 2,000,5.5 (the Bill). It's fine"


def test_wikitext_pairs_stay_within_a_section(tmp_path: Path):
    raw = tmp_path / "wiki.raw"
    raw.write_text(
        " = Alpha = \n First paragraph . \n Second paragraph . \n"
        " = = Early life = = \n Third one . \n Fourth one . \n Fifth one . \n"
        " = Beta = \n Lonely paragraph . \n",
        encoding="utf-8",
    )
    pairs = read_wikitext_pairs(raw)
    assert pairs["text_a"].to_list() == ["First paragraph.", "Third one.", "Fourth one."]
    assert pairs["text_b"].to_list() == ["Second paragraph.", "Fourth one.", "Fifth one."]
    assert pairs["source_ref"].to_list()[1] == "Alpha § Early life ¶1"
    assert pairs["example_id"].to_list() == [0, 1, 2]


def test_missing_file_names_the_path(tmp_path: Path):
    with pytest.raises(CorpusError, match="xnli_validation_en.tsv.*ATTN_DATA_DIR"):
        read_xnli_pairs(tmp_path)


def test_xnli_wrong_columns_named(tmp_path: Path):
    (tmp_path / "xnli").mkdir()
    (tmp_path / "xnli" / "xnli_validation_en.tsv").write_text("id\tsentence\n0\thello\n")
    with pytest.raises(CorpusError, match=r"missing column\(s\) \['premise', 'hypothesis'\]"):
        read_xnli_pairs(tmp_path)


def test_encode_pairs_segments_and_classes(tokenizer):
    texts = pl.DataFrame({"example_id": [7], "source_ref": ["x"], "text_a": ["The cat sat."], "text_b": ["It slept, well."]})
    encoded = encode_corpus(texts, tokenizer, max_len=64, size=10, seed=0)
    tokens = encoded.tokens
    assert tokens["token"].to_list() == ["[CLS]", "the", "cat", "sat", ".", "[SEP]", "it", "slept", ",", "well", ".", "[SEP]"]
    assert tokens["segment"].to_list() == [0] * 6 + [1] * 6
    assert tokens["token_class"].to_list() == ["cls", "other", "other", "other", "punct", "sep", "other", "other", "punct", "other", "punct", "sep"]
    assert tokens["position"].to_list() == list(range(12))
    assert encoded.examples["n_tokens"].to_list() == [12]


def test_encode_drops_long_examples_and_is_seeded(tokenizer):
    texts = pl.DataFrame(
        {
            "example_id": list(range(6)),
            "source_ref": [""] * 6,
            "text_a": ["short one"] * 5 + ["a much longer sentence that will not fit at all"],
            "text_b": ["b"] * 6,
        }
    )
    first = encode_corpus(texts, tokenizer, max_len=6, size=3, seed=1)
    again = encode_corpus(texts, tokenizer, max_len=6, size=3, seed=1)
    assert first.n_too_long == 1 and first.n_candidates == 6
    assert first.examples.height == 3
    assert first.examples["example_id"].to_list() == again.examples["example_id"].to_list()
    assert 5 not in first.examples["example_id"].to_list()
    with pytest.raises(CorpusError, match="no example of 6 fits in 2 tokens"):
        encode_corpus(texts, tokenizer, max_len=2, size=3, seed=1)


def test_demo_corpus_is_built_in(tokenizer):
    demo = read_demo_pairs()
    assert demo.height == 24
    encoded = encode_corpus(demo, tokenizer, CORPORA["demo"].max_len, CORPORA["demo"].size, CORPORA["demo"].seed)
    assert encoded.examples.height == 24 and encoded.n_too_long == 0


def test_real_corpora_sizes(shared_data_dir: Path, tokenizer):
    wiki = CORPORA["wiki_segments"].read(shared_data_dir)
    xnli = CORPORA["xnli_en"].read(shared_data_dir)
    assert wiki.height == 1567  # consecutive same-section pairs, as counted in SOURCES.md
    assert xnli.height == 2490 + 5010
    assert xnli["example_id"].n_unique() == xnli.height
