"""A byte that is not UTF-8 is reported by every text reader with the file, the line and
the byte offset (not a bare UnicodeDecodeError)."""

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from dagster_project.corpora import (
    CorpusError,
    read_conll2012,
    read_framenet,
    read_gap,
    read_glue,
    read_ontogum,
    read_ud,
    read_wikitext_pairs,
    read_xnli_pairs,
)

CONLLU = "# sent_id = s1\n1\tCats\tcat\tNOUN\tNNS\t_\t2\tnsubj\t_\t_\n2\tsleep\tsleep\tVERB\tVBP\t_\t0\troot\t_\t_\n\n"
CONLL_2012 = (
    "#begin document (bc/doc); part 000\n"
    "bc/doc 0 0 John NNP (TOP* - - - Speaker#1 * (7)\n"
    "bc/doc 0 1 saw VBD *) see 01 - Speaker#1 * -\n"
    "#end document\n"
)
FRAMENET = "0\tHe\t_\t_\tB-Experiencer\n1\twas\t_\t_\tO\n2\tagitated\tagitated.a\tEmotion_directed\tO\n\n"
GAP = (
    "ID\tText\tPronoun\tPronoun-offset\tA\tA-offset\tA-coref\tB\tB-offset\tB-coref\tURL\n"
    "dev-1\tAnn met Zoe. She left.\tShe\t13\tAnn\t0\tTRUE\tZoe\t8\tFALSE\thttp://x\n"
)
XNLI = "id\tpremise\thypothesis\tlabel\n0\tHe left.\tHe went.\t0\n"


def _plant(path: Path, text: str, line: int, word: str) -> int:
    """Write `text` with `word` on `line` followed by a latin-1 'é' (0xE9); returns its byte offset."""
    lines = text.encode("utf-8").split(b"\n")
    lines[line - 1] = lines[line - 1].replace(word.encode(), word.encode() + b"\xe9", 1)
    raw = b"\n".join(lines)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(raw)
    return raw.index(b"\xe9")


def _ud(tmp_path: Path) -> tuple[Path, int, Callable]:
    path = tmp_path / "a.conllu"
    return path, _plant(path, CONLLU, 3, "sleep"), lambda: read_ud([path])


def _ontogum(tmp_path: Path) -> tuple[Path, int, Callable]:
    path = tmp_path / "a.conllu"
    return path, _plant(path, CONLLU, 3, "sleep"), lambda: read_ontogum([path], strict=False)


def _conll2012(tmp_path: Path) -> tuple[Path, int, Callable]:
    path = tmp_path / "x_conll"
    return path, _plant(path, CONLL_2012, 3, "saw"), lambda: read_conll2012(path)


def _wikitext(tmp_path: Path) -> tuple[Path, int, Callable]:
    path = tmp_path / "wiki.raw"
    return path, _plant(path, " = A = \n One . \n Two . \n", 3, "Two"), lambda: read_wikitext_pairs(path)


def _framenet(tmp_path: Path) -> tuple[Path, int, Callable]:
    path, core = tmp_path / "fn.conll", tmp_path / "core.json"
    core.write_text(json.dumps({"Emotion_directed": ["Experiencer"]}))
    return path, _plant(path, FRAMENET, 2, "was"), lambda: read_framenet([path], core)


def _framenet_core(tmp_path: Path) -> tuple[Path, int, Callable]:
    conll, path = tmp_path / "fn.conll", tmp_path / "core.json"
    conll.write_text(FRAMENET)
    return (
        path,
        _plant(path, '{\n"Emotion_directed": ["Experiencer"]\n}\n', 2, "Emotion"),
        lambda: read_framenet([conll], path),
    )


def _gap(tmp_path: Path) -> tuple[Path, int, Callable]:
    path = tmp_path / "gap.tsv"
    return path, _plant(path, GAP, 2, "Ann"), lambda: read_gap(path)


def _xnli(tmp_path: Path) -> tuple[Path, int, Callable]:
    path = tmp_path / "xnli" / "xnli_validation_en.tsv"
    (tmp_path / "xnli").mkdir()
    (tmp_path / "xnli" / "xnli_test_en.tsv").write_text(XNLI)
    return path, _plant(path, XNLI, 2, "went"), lambda: read_xnli_pairs(tmp_path, "en")


def _glue(tmp_path: Path) -> tuple[Path, int, Callable]:
    path = tmp_path / "glue" / "glue_style_tsv" / "SST-2" / "dev.tsv"
    return (
        path,
        _plant(path, "sentence\tlabel\nfine\t1\nawful\t0\n", 3, "awful"),
        lambda: read_glue(tmp_path, "sst2", "validation"),
    )


@pytest.mark.parametrize(
    "fixture", [_ud, _ontogum, _conll2012, _wikitext, _framenet, _framenet_core, _gap, _xnli, _glue]
)
def test_non_utf8_byte_names_file_line_and_byte_offset(tmp_path: Path, fixture: Callable):
    path, offset, read = fixture(tmp_path)
    with pytest.raises(CorpusError) as caught:
        read()
    message = str(caught.value)
    line = path.read_bytes()[:offset].count(b"\n") + 1
    assert message.startswith(f"{path}, line {line}, byte offset {offset}: byte 0xe9 is not UTF-8"), message
    assert "re-encode the file as UTF-8" in message
