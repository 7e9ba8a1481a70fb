"""Text-pair readers (WikiText, XNLI, GLUE, demo) on fixtures the tests write themselves."""

from pathlib import Path

import polars as pl
import pytest
from transformers import BertConfig

from dagster_project.corpora import (
    CORPORA,
    CorpusError,
    detokenize_wikitext,
    read_demo_pairs,
    read_glue,
    read_wikitext_pairs,
    read_xnli_pairs,
)
from dagster_project.defs.assets.corpora import head_dimension


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
    pairs = read_wikitext_pairs(raw).texts
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
    with pytest.raises(CorpusError, match=r"missing column\(s\) \['premise', 'hypothesis', 'label'\]"):
        read_xnli_pairs(tmp_path)


def _xnli_fixture(root: Path, language: str, premise: str) -> None:
    (root / "xnli").mkdir(exist_ok=True)
    for split in ("validation", "test"):
        (root / "xnli" / f"xnli_{split}_{language}.tsv").write_text(
            f"id\tpremise\thypothesis\tlabel\n0\t{premise}\tH.\t2\n1\t{premise} 2\tH2.\t0\n"
        )


def test_xnli_languages_share_example_ids(tmp_path: Path):
    _xnli_fixture(tmp_path, "en", "He left.")
    _xnli_fixture(tmp_path, "de", "Er ging.")
    english, german = read_xnli_pairs(tmp_path, "en").texts, read_xnli_pairs(tmp_path, "de").texts
    assert english["example_id"].to_list() == german["example_id"].to_list() == [0, 1, 100000, 100001]
    assert english["group_id"].to_list() == german["group_id"].to_list()
    assert german["text_a"][0] == "Er ging."
    assert english["label_text"].to_list()[:2] == ["contradiction", "entailment"]


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ("0\tP.\tH.\t2\n1\tP.\tH.\tneutral\n", "line 3: label 'neutral' is not one of [0, 1, 2]"),
        ("0\tP.\tH.\t7\n", "line 2: label '7' is not one of [0, 1, 2]"),
        ("0\tP.\tH.\t1\nx1\tP.\tH.\t1\n", "line 3: id 'x1' is not an integer"),
    ],
)
def test_xnli_values_that_are_not_numbers_name_the_file_and_line(tmp_path: Path, rows: str, message: str) -> None:
    path = tmp_path / "xnli" / "xnli_validation_en.tsv"
    path.parent.mkdir()
    path.write_text("id\tpremise\thypothesis\tlabel\n" + rows)
    with pytest.raises(CorpusError) as error:
        read_xnli_pairs(tmp_path)
    assert str(error.value) == f"{path}, {message}"


def _glue_tsv(root: Path, folder: str, text: str) -> Path:
    path = root / "glue" / "glue_style_tsv" / folder / "dev.tsv"
    path.parent.mkdir(parents=True)
    path.write_text(text)
    return path


def test_glue_tsv_labels_by_name_and_number(tmp_path: Path):
    _glue_tsv(
        tmp_path,
        "RTE",
        "index\tsentence1\tsentence2\tlabel\n0\tA man.\tA person.\tentailment\n1\tA cat.\tA dog.\tnot_entailment\n",
    )
    texts = read_glue(tmp_path, "rte", "validation").texts
    assert texts["label"].to_list() == [0.0, 1.0]
    assert texts["label_text"].to_list() == ["entailment", "not_entailment"]
    assert texts["text_b"].to_list() == ["A person.", "A dog."]


def test_glue_tsv_single_sentences_and_scores(tmp_path: Path):
    _glue_tsv(tmp_path, "SST-2", "sentence\tlabel\nit 's charming . \t1\nawful\t0\n")
    sst = read_glue(tmp_path, "sst2", "validation").texts
    assert sst["label_text"].to_list() == ["positive", "negative"] and sst["text_b"].null_count() == 2
    _glue_tsv(tmp_path, "STS-B", "index\tsentence1\tsentence2\tscore\n0\tA.\tB.\t3.800\n")
    assert read_glue(tmp_path, "stsb", "validation").texts["label"].to_list() == [3.8]


def test_glue_bad_label_names_file_and_line(tmp_path: Path):
    path = _glue_tsv(tmp_path, "RTE", "index\tsentence1\tsentence2\tlabel\n0\tA.\tB.\tentailment\n1\tA.\tB.\tmaybe\n")
    with pytest.raises(CorpusError, match=f"{path}, line 3: label 'maybe'"):
        read_glue(tmp_path, "rte", "validation")


def test_demo_corpus_is_built_in():
    assert read_demo_pairs().texts.height == 24


def test_real_corpora_sizes(shared_data_dir: Path):
    assert CORPORA["wiki_segments"].read(shared_data_dir).texts.height == 1567  # as counted in SOURCES.md
    assert CORPORA["xnli_en"].read(shared_data_dir).texts.height == 2490 + 5010
    sizes = {
        task: read_glue(shared_data_dir, task, "validation").texts.height
        for task in ("mrpc", "qnli", "rte", "sst2", "stsb")
    }
    assert sizes == {"mrpc": 408, "qnli": 5463, "rte": 277, "sst2": 872, "stsb": 1500}
    rte = read_glue(shared_data_dir, "rte", "validation").texts
    assert set(rte["label_text"]) == {"entailment", "not_entailment"}
    assert read_glue(shared_data_dir, "sst2", "train").texts.height == 67349
    assert read_glue(shared_data_dir, "rte", "test").texts["label"].null_count() == 3000  # unlabeled
    ar = CORPORA["xnli_ar"].read(shared_data_dir).texts
    assert ar.filter(pl.col("example_id") == 0)["group_id"].to_list() == [0]


def test_glue_tsv_row_missing_a_column_names_file_and_line(tmp_path: Path):
    # Row 3 lost its second sentence: read as is, the label would slide into text_b.
    path = _glue_tsv(
        tmp_path, "RTE", "index\tsentence1\tsentence2\tlabel\n0\tA.\tB.\tentailment\n1\tA cat.\tnot_entailment\n"
    )
    with pytest.raises(
        CorpusError,
        match=rf"{path}, line 3: 3 tab-separated fields where the header has 4 \(index, sentence1, sentence2, label\)",
    ):
        read_glue(tmp_path, "rte", "validation")


def test_tsv_row_with_an_extra_column_names_file_and_line(tmp_path: Path):
    path = _glue_tsv(tmp_path, "SST-2", "sentence\tlabel\nfine\t1\nawful\t0\textra\n")
    with pytest.raises(CorpusError, match=rf"{path}, line 3: 3 tab-separated fields where the header has 2"):
        read_glue(tmp_path, "sst2", "validation")


def test_glue_empty_label_in_a_labelled_split_names_file_and_line(tmp_path: Path):
    path = _glue_tsv(tmp_path, "SST-2", "sentence\tlabel\nfine\t1\nawful\t\n")
    with pytest.raises(CorpusError, match=rf"{path}, line 3: empty label in the validation split"):
        read_glue(tmp_path, "sst2", "validation")


def test_glue_parquet_missing_label_in_a_labelled_split_names_file_and_row(tmp_path: Path):
    path = tmp_path / "glue" / "hf_parquet" / "rte_validation.parquet"
    path.parent.mkdir(parents=True)
    frame = pl.DataFrame({"sentence1": ["A.", "C."], "sentence2": ["B.", "D."], "label": [0, None], "idx": [0, 1]})
    frame.write_parquet(path)
    with pytest.raises(CorpusError, match=rf"{path}, row 2: no label \(None\) in the validation split"):
        read_glue(tmp_path, "rte", "validation")
    frame.with_columns(label=pl.lit(-1)).write_parquet(path)
    with pytest.raises(CorpusError, match=rf"{path}, row 1: no label \(-1\) in the validation split"):
        read_glue(tmp_path, "rte", "validation")
    # A test split has no labels: -1 (HF) is kept as a null label.
    test = path.with_name("rte_test.parquet")
    frame.with_columns(label=pl.lit(-1)).write_parquet(test)
    assert read_glue(tmp_path, "rte", "test").texts["label"].null_count() == 2


def test_glue_tsv_test_split_without_labels(tmp_path: Path):
    path = tmp_path / "glue" / "glue_style_tsv" / "RTE" / "test.tsv"
    path.parent.mkdir(parents=True)
    path.write_text("index\tsentence1\tsentence2\n0\tA.\tB.\n1\tC.\t\n".replace("\t\n", "\tD.\n"))
    texts = read_glue(tmp_path, "rte", "test").texts
    assert texts["text_b"].to_list() == ["B.", "D."] and texts["label"].null_count() == 2


def test_paper_length_rules_of_the_pair_corpora():
    # Clark §3: segments are truncated to 128 pieces ("most segments are 128 tokens"), not dropped.
    wiki = CORPORA["wiki_segments"]
    assert (wiki.overlong, wiki.max_len, wiki.default_max_len(32)) == ("truncate", 128, 128)
    # Pascual: inputs no longer than the model's head dimension (64 for BERT-base, 32 for MiniLM);
    # max_len stays the paper's fixed 64 for run config.
    for language in ("en", "de", "ar"):
        xnli = CORPORA[f"xnli_{language}"]
        assert (xnli.overlong, xnli.max_len, xnli.default_max_len(32), xnli.default_max_len(64)) == ("drop", 64, 32, 64)
    assert CORPORA["glue_rte"].default_max_len(32) == 128


def test_head_dimension_of_a_model_config():
    # The XNLI cap of the corpus asset: config.head_dim where a model sets it, else hidden / heads.
    assert head_dimension(BertConfig(hidden_size=384, num_attention_heads=12)) == 32  # MiniLM
    assert head_dimension(BertConfig(hidden_size=768, num_attention_heads=12)) == 64  # BERT-base
    config = BertConfig(hidden_size=768, num_attention_heads=12)
    config.head_dim = 48
    assert head_dimension(config) == 48
