"""Coreference readers on fixtures: nested, discontinuous and unbalanced mentions, GAP
offsets, CoNLL-2012 brackets, and the cutting of documents into windows."""

from pathlib import Path

import polars as pl
import pytest
from transformers import AutoTokenizer

from dagster_project.corpora import (
    CORPORA,
    CorpusError,
    encode_corpus,
    prepare_documents,
    read_conll2012,
    read_gap,
    read_ontogum,
    window_documents,
)
from dagster_project.corpora.coreference import mention_type_source

ONTOGUM = """# newdoc id = doc_a
# sent_id = doc_a-1
1	Byron	Byron	PROPN	NNP	_	2	nsubj	_	Entity=(1)
2	met	meet	VERB	VBD	_	0	root	_	_
3	his	his	PRON	PRP$	_	4	nmod:poss	_	Entity=(2(1)
4	old	old	ADJ	JJ	_	5	amod	_	_
5	teacher	teacher	NOUN	NN	_	2	obj	_	Entity=2)
6	.	.	PUNCT	.	_	2	punct	_	_

# sent_id = doc_a-2
1	He	he	PRON	PRP	_	2	nsubj	_	Entity=(1)
2	thanked	thank	VERB	VBD	_	0	root	_	_
3	the	the	DET	DT	_	4	det	_	Entity=(2[1/2]
4	man	man	NOUN	NN	_	2	obj	_	Entity=2[1/2])
5	warmly	warmly	ADV	RB	_	2	advmod	_	_
6	himself	himself	PRON	PRP	_	4	nmod	_	Entity=(2[2/2])

"""


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_nested_and_discontinuous_mentions(tmp_path: Path):
    data = read_ontogum([_write(tmp_path, "a.conllu", ONTOGUM)])
    mentions = data.annotations["coref_mentions"].sort("word_start", "word_end", descending=[False, True])
    spans = list(
        zip(
            mentions["cluster_id"],
            mentions["word_start"],
            mentions["word_end"],
            mentions["head_word"],
            mentions["mention_type"],
            mentions["is_discontinuous"],
        )
    )
    assert spans == [
        ("1", 0, 1, 0, "proper", False),  # Byron
        ("2", 2, 5, 4, "nominal", False),  # [his old teacher], head "teacher"
        ("1", 2, 3, 2, "pronoun", False),  # his, nested inside
        ("1", 6, 7, 6, "pronoun", False),  # He
        ("2", 8, 12, 9, "nominal", True),  # the man ... himself, parts 1/2 and 2/2
    ]
    assert data.texts["text_a"].to_list() == ["Byron met his old teacher . He thanked the man warmly himself"]


def test_unbalanced_brackets_name_file_and_line(tmp_path: Path):
    path = _write(tmp_path, "b.conllu", ONTOGUM.replace("Entity=2)", "_"))
    with pytest.raises(
        CorpusError, match=rf"{path}, line 5: coreference bracket '\(2' is never closed in document doc_a"
    ):
        read_ontogum([path])
    path = _write(tmp_path, "c.conllu", ONTOGUM.replace("Entity=(2(1)", "Entity=(1)"))
    with pytest.raises(
        CorpusError, match=rf"{path}, line 7: coreference bracket '2\)' closes a mention that was never opened"
    ):
        read_ontogum([path])
    lenient = read_ontogum([path], strict=False)
    assert len(lenient.problems) == 1 and lenient.annotations["coref_mentions"].height == 4


def test_windows_keep_whole_sentences_and_inner_mentions(tmp_path: Path, tiny_model_dir: Path):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    data = read_ontogum([_write(tmp_path, "a.conllu", ONTOGUM)])
    windows = window_documents(data, tokenizer, max_len=10)  # 6 + 6 pieces + 2 specials > 10
    assert windows.texts["text_a"].to_list() == ["Byron met his old teacher .", "He thanked the man warmly himself"]
    assert windows.texts["group_id"].to_list() == [0, 0]
    mentions = windows.annotations["coref_mentions"].sort("example_id", "word_start")
    assert list(zip(mentions["example_id"], mentions["word_start"], mentions["word_end"])) == [
        (0, 0, 1),
        (0, 2, 5),
        (0, 2, 3),
        (1, 0, 1),
        (1, 2, 6),
    ]
    whole = window_documents(data, tokenizer, max_len=128)
    assert whole.texts.height == 1 and whole.annotations["coref_clusters"]["n_mentions"].sort().to_list() == [2, 3]
    encoded = encode_corpus(windows, tokenizer, 10, None, 0)
    assert encoded.annotations["coref_mentions"].height == 5


def test_documents_are_truncated_to_their_first_pieces_by_default(tmp_path: Path, tiny_model_dir: Path):
    """Clark footnote 4: the document's first max_len pieces; with 2 specials, 8 one-piece words."""
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    data = read_ontogum([_write(tmp_path, "a.conllu", ONTOGUM)])
    assert CORPORA["ontogum"].overlong == "truncate"
    cut = prepare_documents(data, tokenizer, 10, "truncate")
    assert cut.texts.select("example_id", "text_a", "group_id").rows() == [
        (0, "Byron met his old teacher . He thanked", 0)
    ]
    mentions = cut.annotations["coref_mentions"].sort("word_start", "word_end")
    # "the man" (8-10) and "himself" (11-12) end past the cut
    assert list(zip(mentions["word_start"], mentions["word_end"])) == [(0, 1), (2, 3), (2, 5), (6, 7)]
    # cluster 1: Byron, his, He; cluster 2: his old teacher
    assert cut.annotations["coref_clusters"].sort("cluster_id")["n_mentions"].to_list() == [3, 1]
    encoded = encode_corpus(cut, tokenizer, 10, None, 0)
    assert encoded.examples["n_tokens"].to_list() == [10] and encoded.annotations["coref_mentions"].height == 4
    # the windows option keeps both sentences as examples; drop leaves the 14-piece document to be dropped
    assert prepare_documents(data, tokenizer, 10, "windows").texts.height == 2
    assert prepare_documents(data, tokenizer, 10, "drop") is data


CONLL_2012 = """#begin document (bc/doc); part 000
bc/doc 0 0 John NNP (TOP* - - - Speaker#1 * (7)
bc/doc 0 1 saw VBD * see 01 - Speaker#1 * -
bc/doc 0 2 his PRP$ * - - - Speaker#1 * (7)|(8
bc/doc 0 3 dog NN *) - - - Speaker#1 * 8)

bc/doc 0 0 It PRP (TOP* - - - Speaker#1 * (8)
bc/doc 0 1 barked VBD *) bark 01 - Speaker#1 * -
#end document
"""


def test_conll2012_brackets_in_the_last_column(tmp_path: Path):
    data = read_conll2012(_write(tmp_path, "x_conll", CONLL_2012))
    mentions = data.annotations["coref_mentions"].sort("word_start", "word_end", descending=[False, True])
    assert list(
        zip(mentions["cluster_id"], mentions["word_start"], mentions["word_end"], mentions["mention_type"])
    ) == [("7", 0, 1, "proper"), ("8", 2, 4, "nominal"), ("7", 2, 3, "pronoun"), ("8", 4, 5, "pronoun")]
    assert data.annotations["sentences"]["word_start"].to_list() == [0, 4]
    with pytest.raises(CorpusError, match=r"line 3: expected at least 12"):
        read_conll2012(
            _write(
                tmp_path,
                "bad_conll",
                CONLL_2012.replace("bc/doc 0 1 saw VBD * see 01 - Speaker#1 * -", "bc/doc 0 1 saw"),
            )
        )


# LitBank's CoNLL-2012 files: `_` in the POS column. "Mr." is capitalized sentence-initially
# only, "Holmes" also inside a sentence; "Watson" only sentence-initially (nominal: no evidence).
LITBANK = """#begin document (litbank/doc); part 0
doc 0 0 Holmes _ _ _ _ _ _ _ (1)
doc 0 1 saw _ _ _ _ _ _ _ -
doc 0 2 the _ _ _ _ _ _ _ (2
doc 0 3 dog _ _ _ _ _ _ _ 2)

doc 0 0 He _ _ _ _ _ _ _ (1)
doc 0 1 liked _ _ _ _ _ _ _ -
doc 0 2 it _ _ _ _ _ _ _ (2)
doc 0 3 and _ _ _ _ _ _ _ -
doc 0 4 Holmes _ _ _ _ _ _ _ (1)
doc 0 5 knew _ _ _ _ _ _ _ -

doc 0 0 Watson _ _ _ _ _ _ _ (3)
doc 0 1 left _ _ _ _ _ _ _ -
#end document
"""


def test_without_a_pos_column_mention_types_come_from_the_words(tmp_path: Path):
    mentions = read_conll2012(_write(tmp_path, "litbank_conll", LITBANK)).annotations["coref_mentions"]
    words = ["Holmes", "the dog", "He", "it", "Holmes", "Watson"]
    assert mentions.sort("word_start")["mention_type"].to_list() == [
        "proper",  # sentence-initial, but capitalized inside a sentence elsewhere
        "nominal",
        "pronoun",
        "pronoun",
        "proper",
        "nominal",  # only ever sentence-initial
    ], words
    assert mentions["head_xpos"].null_count() == mentions.height
    assert mention_type_source(mentions).startswith("the head word")
    tagged = read_conll2012(_write(tmp_path, "x_conll", CONLL_2012)).annotations["coref_mentions"]
    assert mention_type_source(tagged).startswith("POS column")


GAP_HEADER = "ID\tText\tPronoun\tPronoun-offset\tA\tA-offset\tA-coref\tB\tB-offset\tB-coref\tURL\n"


def test_gap_offsets_become_word_spans(tmp_path: Path):
    text = "Mary Ann met Zoe Telford. She smiled."
    row = f"dev-1\t{text}\tShe\t{text.index('She')}\tMary Ann\t0\tTRUE\tZoe Telford\t{text.index('Zoe')}\tFALSE\thttp://x\n"
    data = read_gap(_write(tmp_path, "gap.tsv", GAP_HEADER + row))
    mentions = data.annotations["coref_mentions"].sort("mention_id")
    assert list(zip(mentions["role"], mentions["word_start"], mentions["word_end"], mentions["cluster_id"])) == [
        ("pronoun", 6, 7, "P"),
        ("A", 0, 2, "P"),
        ("B", 3, 5, "B"),
    ]
    assert mentions["gold_coref"].to_list() == [True, True, False]
    bad = row.replace(f"\t{text.index('She')}\t", "\tx\t")
    with pytest.raises(CorpusError, match="line 2: Pronoun-offset 'x' is not a character offset"):
        read_gap(_write(tmp_path, "bad.tsv", GAP_HEADER + bad))


@pytest.mark.slow
def test_real_coreference_counts(shared_data_dir: Path):
    gap = CORPORA["gap_development"].read(shared_data_dir)
    assert gap.texts.height == 2000  # SOURCES.md: GAP dev 2000 rows
    assert gap.annotations["coref_mentions"].height == 6000
    ontogum = CORPORA["ontogum"].read(shared_data_dir)
    assert ontogum.texts.height == 263  # documents
    mentions = ontogum.annotations["coref_mentions"].height
    assert 32629 - 2 * len(ontogum.problems) <= mentions <= 32629  # SOURCES.md: 32629 mentions
    assert ontogum.annotations["coref_mentions"].filter(pl.col("mention_type") == "pronoun").height > 10000


def test_ontogum_malformed_tree_is_an_error_or_skipped_when_lenient(tmp_path: Path):
    # "his" (word 3 of the first sentence) points at a word the sentence does not have.
    path = _write(tmp_path, "t.conllu", ONTOGUM.replace("PRP$\t_\t4\tnmod:poss", "PRP$\t_\t99\tnmod:poss"))
    message = rf"{path}, line 5, sentence doc_a-1: head 99 of word 3 \('his'\) is outside the sentence"
    with pytest.raises(CorpusError, match=message):
        read_ontogum([path])
    lenient = read_ontogum([path], strict=False)
    # The first sentence is skipped; the document keeps its second sentence.
    assert lenient.texts["text_a"].to_list() == ["He thanked the man warmly himself"]
    assert lenient.texts["source_ref"].to_list() == ["doc_a"]
    assert lenient.annotations["sentences"]["word_start"].to_list() == [0]
    assert [problem for problem in lenient.problems if "outside the sentence" in problem] == [
        f"{path}, line 5, sentence doc_a-1: head 99 of word 3 ('his') is outside the sentence (word ids 1-6); "
        "set HEAD (column 7) to 0 or a word id of this sentence; sentence skipped"
    ]
    assert lenient.annotations["coref_mentions"].height == 2  # He, the man ... himself
