"""FrameNet links (Kovaleva §4.2): the filters on sentence length, element length, core
elements and distance, on a fixture; and the count on the staged files."""

import json
from pathlib import Path

import pytest

from dagster_project.corpora import CORPORA, CorpusError, read_framenet

BLOCKS = """0\tHe\t_\t_\tB-Experiencer
1\twas\t_\t_\tO
2\tbecoming\t_\t_\tO
3\tagitated\tagitated.a\tEmotion_directed\tO

0\tHe\t_\t_\tO
1\twas\t_\t_\tO
2\tbecoming\tbecome.v\tBecoming\tO
3\tagitated\t_\t_\tB-Final_quality

0\tShe\t_\t_\tB-Donor
1\tgave\tgive.v\tGiving\tO
2\tthe\t_\t_\tB-Theme
3\tvery\t_\t_\tI-Theme
4\tbig\t_\t_\tI-Theme
5\tbook\t_\t_\tI-Theme
6\tto\t_\t_\tB-Recipient
7\tme\t_\t_\tI-Recipient
8\ttoday\t_\t_\tB-Time

0\tHe\t_\t_\tB-Experiencer
1\twas\t_\t_\tO
2\tbecoming\t_\t_\tO
3\tagitated\tagitated.a\tEmotion_directed\tO

0\tMary\t_\t_\tB-Perceiver_passive
1\tquickly\t_\t_\tO
2\tsaw\tsee.v\tPerception_experience\tO
3\tthe\t_\t_\tO
4\told\t_\t_\tO
5\tdog\t_\t_\tO

0\tMary\t_\t_\tB-Owner
1\tquickly\t_\t_\tO
2\tsaw\t_\t_\tO
3\tthe\t_\t_\tO
4\told\t_\t_\tO
5\tdog\tdog.n\tOwnership\tO

"""
# The staged dev+test files: 44 frame annotations pass the filters (47 when only core elements had to be <= 3 words).
EXAMPLES_STAGED = 44
CORE = {
    "Emotion_directed": ["Experiencer"],
    "Becoming": ["Entity", "Final_quality"],
    "Giving": ["Donor", "Theme", "Recipient"],
    "Perception_experience": ["Perceiver_passive"],
    "Ownership": ["Owner"],
}


def _fixture(tmp_path: Path, blocks: str = BLOCKS) -> tuple[Path, Path]:
    conll, core = tmp_path / "fn.conll", tmp_path / "core.json"
    conll.write_text(blocks, encoding="utf-8")
    core.write_text(json.dumps(CORE))
    return conll, core


def test_one_example_per_frame_annotation_that_passes_the_filters(tmp_path: Path):
    conll, core = _fixture(tmp_path)
    data = read_framenet([conll], core)
    links = data.annotations["frame_links"]
    # "He ... agitated": kept (3 words apart), and its second copy is the same example.
    # "becoming agitated": its core element is adjacent, so the annotation is left out.
    # Giving: "She gave" is adjacent and "the very big book" 4 words, so the whole annotation is
    # left out, its "to me" link with it ("today" is not a core element).
    # "Mary quickly saw the old dog" carries two frames: two examples, a link each.
    assert links.select("example_id", "lexical_unit", "element", "distance").rows() == [
        (0, "agitated.a", "Experiencer", 3),
        (1, "see.v", "Perceiver_passive", 2),
        (2, "dog.n", "Owner", 5),
    ]
    assert data.texts["text_a"].to_list() == [
        "He was becoming agitated",
        "Mary quickly saw the old dog",
        "Mary quickly saw the old dog",
    ]


def test_long_sentences_are_left_out(tmp_path: Path):
    long_block = "".join(
        f"{i}\tw{i}\t{'x.v' if i == 0 else '_'}\t{'Giving' if i == 0 else '_'}\t{'B-Donor' if i == 5 else 'O'}\n"
        for i in range(13)
    )
    conll, core = _fixture(tmp_path, BLOCKS + long_block + "\n")
    assert read_framenet([conll], core).texts.height == 3


def test_the_length_limit_holds_for_every_frame_element(tmp_path: Path):
    # the core Experiencer is 1 word and 3 from the target, but the non-core Topic is 4 words
    block = (
        "0\tHe\t_\t_\tB-Experiencer\n1\twas\t_\t_\tO\n2\tbecoming\t_\t_\tO\n"
        "3\tagitated\tagitated.a\tEmotion_directed\tO\n4\tabout\t_\t_\tB-Topic\n"
        "5\tthe\t_\t_\tI-Topic\n6\twhole\t_\t_\tI-Topic\n7\taffair\t_\t_\tI-Topic\n"
    )
    conll, core = _fixture(tmp_path, BLOCKS + block + "\n")
    texts = read_framenet([conll], core).texts["text_a"].to_list()
    assert len(texts) == 3 and "He was becoming agitated about the whole affair" not in texts
    # three words of Topic pass
    conll, core = _fixture(tmp_path, BLOCKS + block.replace("5\tthe\t_\t_\tI-Topic", "5\tthe\t_\t_\tO") + "\n")
    assert "He was becoming agitated about the whole affair" in read_framenet([conll], core).texts["text_a"].to_list()


def test_malformed_lines_name_file_and_line(tmp_path: Path):
    conll, core = _fixture(tmp_path, BLOCKS.replace("1\twas\t_\t_\tO\n", "1\twas\t_\t_\n", 1))
    with pytest.raises(CorpusError, match=rf"{conll}, line 2: expected 5 tab-separated columns"):
        read_framenet([conll], core)
    conll, core = _fixture(tmp_path, BLOCKS.replace("B-Time", "Time"))
    with pytest.raises(
        CorpusError, match=rf"{conll}, line 19: frame element tag 'Time' is not O, B-<name> or I-<name>"
    ):
        read_framenet([conll], core)


def test_staged_framenet_counts(shared_data_dir: Path):
    data = CORPORA["framenet"].read(shared_data_dir)
    # one example per frame annotation that passes the filters (the paper: 473 sentences)
    assert data.texts.height == EXAMPLES_STAGED
    links = data.annotations["frame_links"]
    assert links["distance"].min() >= 2 and (links["element_end"] - links["element_start"]).max() <= 3
    assert data.words.group_by("example_id").len()["len"].max() <= 12
