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

"""
CORE = {
    "Emotion_directed": ["Experiencer"],
    "Becoming": ["Entity", "Final_quality"],
    "Giving": ["Donor", "Theme", "Recipient"],
}


def _fixture(tmp_path: Path, blocks: str = BLOCKS) -> tuple[Path, Path]:
    conll, core = tmp_path / "fn.conll", tmp_path / "core.json"
    conll.write_text(blocks, encoding="utf-8")
    core.write_text(json.dumps(CORE))
    return conll, core


def test_links_are_filtered_like_the_paper(tmp_path: Path):
    conll, core = _fixture(tmp_path)
    data = read_framenet([conll], core)
    links = data.annotations["frame_links"]
    # "He ... agitated": kept (3 words apart). "becoming agitated": adjacent, dropped.
    # "She gave": adjacent, dropped; "the very big book": 4 words, dropped; "to me": kept;
    # "today": not a core element of Giving.
    assert links.select("example_id", "lexical_unit", "element", "distance").rows() == [
        (0, "agitated.a", "Experiencer", 3),
        (1, "give.v", "Recipient", 5),
    ]
    assert data.texts["text_a"].to_list() == ["He was becoming agitated", "She gave the very big book to me today"]


def test_long_sentences_are_left_out(tmp_path: Path):
    long_block = "".join(
        f"{i}\tw{i}\t{'x.v' if i == 0 else '_'}\t{'Giving' if i == 0 else '_'}\t{'B-Donor' if i == 5 else 'O'}\n"
        for i in range(13)
    )
    conll, core = _fixture(tmp_path, BLOCKS + long_block + "\n")
    assert read_framenet([conll], core).texts.height == 2


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
    # SOURCES.md: 404 unique sentences of <= 12 tokens in dev+test; those with a kept link remain.
    assert 100 < data.texts.height <= 404
    links = data.annotations["frame_links"]
    assert links["distance"].min() >= 2 and (links["element_end"] - links["element_start"]).max() <= 3
    assert data.words.group_by("example_id").len()["len"].max() <= 12
