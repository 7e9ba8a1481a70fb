"""UD CoNLL-U reading: multiword tokens, empty nodes, gold heads, and malformed lines."""

from pathlib import Path

import pytest

from dagster_project.corpora import CORPORA, CorpusError, read_ud

SENTENCES = """# sent_id = s1
# text = I don't know.
1	I	I	PRON	PRP	_	4	nsubj	_	_
2-3	don't	_	_	_	_	_	_	_	_
2	do	do	AUX	VBP	_	4	aux	_	_
3	n't	not	PART	RB	_	4	advmod	_	_
4	know	know	VERB	VB	_	0	root	_	_
4.1	knows	know	VERB	VB	_	_	_	4:conj	_
5	.	.	PUNCT	.	_	4	punct	_	_

# sent_id = s2
1	Cats	cat	NOUN	NNS	_	2	nsubj	_	_
2	sleep	sleep	VERB	VBP	_	0	root	_	_

"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "fixture.conllu"
    path.write_text(text, encoding="utf-8")
    return path


def test_multiword_tokens_are_surface_words(tmp_path: Path):
    data = read_ud([_write(tmp_path, SENTENCES)])
    assert data.texts["text_a"].to_list() == ["I don't know .", "Cats sleep"]
    assert data.texts["source_ref"].to_list() == ["fixture.conllu:s1", "fixture.conllu:s2"]
    assert data.words.filter(data.words["example_id"] == 0)["word"].to_list() == ["I", "don't", "know", "."]
    deps = data.annotations["dependencies"].filter(data.annotations["dependencies"]["example_id"] == 0)
    # Syntactic words do and n't both sit on surface word 1; the empty node 4.1 is skipped.
    assert deps["ud_id"].to_list() == [1, 2, 3, 4, 5]
    assert deps["word_index"].to_list() == [0, 1, 1, 2, 3]
    assert deps["head_word_index"].to_list() == [2, 2, 2, None, 2]
    assert deps["relation"].to_list() == ["nsubj", "aux", "advmod", "root", "punct"]
    assert deps["upos"].to_list() == ["PRON", "AUX", "PART", "VERB", "PUNCT"]


def test_wrong_column_count_names_file_and_line(tmp_path: Path):
    path = _write(tmp_path, SENTENCES.replace("1\tCats\tcat\tNOUN\tNNS\t_\t2\tnsubj\t_\t_", "1\tCats\tcat\tNOUN"))
    with pytest.raises(CorpusError, match=rf"{path}, line 12: expected 10 tab-separated CoNLL-U columns, found 4"):
        read_ud([path])


def test_non_integer_head_names_file_and_line(tmp_path: Path):
    path = _write(tmp_path, SENTENCES.replace("2\tsleep\tsleep\tVERB\tVBP\t_\t0", "2\tsleep\tsleep\tVERB\tVBP\t_\tx"))
    with pytest.raises(CorpusError, match=rf"{path}, line 13: head 'x' is not an integer word id"):
        read_ud([path])


def test_empty_file_is_an_error(tmp_path: Path):
    with pytest.raises(CorpusError, match="no sentences"):
        read_ud([_write(tmp_path, "# just a comment\n")])


def test_real_treebank_counts(shared_data_dir: Path):
    ewt_dev = CORPORA["ud_ewt_dev"].read(shared_data_dir)
    assert ewt_dev.texts.height == 2001  # SOURCES.md: EWT dev 2001 sentences, 25147 tokens
    assert ewt_dev.annotations["dependencies"].height == 25147
    assert CORPORA["ud_ewt_test"].read(shared_data_dir).texts.height == 2077
    gum_dev = CORPORA["ud_gum_dev"].read(shared_data_dir)
    assert gum_dev.texts.height == 1575 and gum_dev.annotations["dependencies"].height == 28119


def test_head_outside_the_sentence_names_file_line_and_sentence(tmp_path: Path):
    path = _write(tmp_path, SENTENCES.replace("1\tCats\tcat\tNOUN\tNNS\t_\t2", "1\tCats\tcat\tNOUN\tNNS\t_\t99"))
    with pytest.raises(
        CorpusError,
        match=rf"{path}, line 12, sentence s2: head 99 of word 1 \('Cats'\) is outside the sentence \(word ids 1-2\); "
        r"set HEAD \(column 7\) to 0 or a word id of this sentence",
    ):
        read_ud([path])


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (  # 1 -> 2 -> 1, and no root left
            "2\tsleep\tsleep\tVERB\tVBP\t_\t0\troot",
            "2\tsleep\tsleep\tVERB\tVBP\t_\t1\tccomp",
            r"line 12, sentence s2: no root \(no word has head 0\); exactly one word needs head 0",
        ),
        (
            "1\tCats\tcat\tNOUN\tNNS\t_\t2\tnsubj",
            "1\tCats\tcat\tNOUN\tNNS\t_\t0\tnsubj",
            r"line 13, sentence s2: two roots \(words 1 and 2 have head 0\); exactly one word needs head 0",
        ),
        (
            "1\tCats\tcat\tNOUN\tNNS\t_\t2\tnsubj",
            "1\tCats\tcat\tNOUN\tNNS\t_\t2\troot",
            r"line 12, sentence s2: word 1 \('Cats'\) has relation 'root' but head 2; a root's head must be 0",
        ),
        (  # the root is word 4; 1 -> 3 -> 1 never reaches it
            "1\tI\tI\tPRON\tPRP\t_\t4",
            "1\tI\tI\tPRON\tPRP\t_\t3",
            r"line 3, sentence s1: dependency cycle 1 -> 3 -> 1 \(these heads never reach the root\)",
        ),
    ],
)
def test_malformed_trees_name_file_line_and_sentence(tmp_path: Path, old: str, new: str, message: str):
    fixture = SENTENCES.replace(old, new)
    if "dependency cycle" in message:
        fixture = fixture.replace("3\tn't\tnot\tPART\tRB\t_\t4", "3\tn't\tnot\tPART\tRB\t_\t1")
    assert fixture != SENTENCES
    path = _write(tmp_path, fixture)
    with pytest.raises(CorpusError, match=rf"{path}, {message}"):
        read_ud([path])


PTB_ONLY = """# sent_id = p1
1	The	the	_	DT	_	2	det	_	_
2	cat	cat	_	NN	_	3	nsubj	_	_
3	sat	sit	_	VBD	_	0	root	_	_
4	.	.	_	.	_	3	punct	_	_

"""


def test_missing_upos_comes_from_the_ptb_tag(tmp_path: Path):
    deps = read_ud([_write(tmp_path, PTB_ONLY)]).annotations["dependencies"]
    assert deps["upos"].to_list() == ["DET", "NOUN", "VERB", "PUNCT"]


def test_missing_upos_without_a_ptb_tag_is_refused(tmp_path: Path):
    path = _write(tmp_path, PTB_ONLY.replace("_\tNN\t", "_\t_\t"))
    with pytest.raises(CorpusError, match=r"fixture\.conllu, line 3, sentence p1: word 2 \('cat'\) has no UPOS"):
        read_ud([path])
