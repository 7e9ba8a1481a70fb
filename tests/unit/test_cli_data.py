"""`attn-warehouse data list | fetch | verify` with a real HTTP server on 127.0.0.1 serving the staged
data as the mirror (or the staged folder itself as --mirror DIR), into an empty data directory:
fetch a small corpus and verify it; a changed byte on the mirror is refused and nothing is kept; a
partial download is completed by a Range request; verify names a file that changed; an unknown
corpus name is one line listing the known ones, exit status 2."""

import os
import re
import signal
import sys
from pathlib import Path

import pytest

from dagster_project.cli import main
from dagster_project.corpora.manifest import load_manifest, sha256_of
from tests.mirror_server import serving

GAP_FILES = ["gap_coreference/LICENSE", "gap_coreference/README.md", "gap_coreference/gap-validation.tsv"]


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty data directory (ATTN_DATA_DIR), the Dagster home in tmp_path, no mirror setting."""
    monkeypatch.setenv("ATTN_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))
    monkeypatch.delenv("ATTN_DATA_MIRROR", raising=False)
    return tmp_path / "data"


def files_in(folder: Path) -> list[str]:
    return sorted(path.relative_to(folder).as_posix() for path in folder.rglob("*") if path.is_file())


def test_fetch_a_corpus_from_an_http_mirror_then_verify_it(
    shared_data_dir: Path, data_dir: Path, capsys: pytest.CaptureFixture
) -> None:
    with serving(shared_data_dir) as server:
        assert main(["data", "fetch", "gap_validation", "--mirror", server.url]) == 0
    assert sorted(name for name, _ in server.requests) == GAP_FILES
    assert files_in(data_dir) == GAP_FILES
    out = capsys.readouterr().out
    assert "gap_validation: fetched 3 files (260 kB)" in out
    assert out.count("licence of gap_validation: Apache-2.0") == 1
    assert "cite for gap_validation: Webster, Recasens, Axelrod, Baldridge (2018). Mind the GAP" in out

    assert main(["data", "verify"]) == 0
    out = capsys.readouterr().out
    assert "gap_validation: 3 of 3 files present, ok" in out
    assert "gap_test: 2 of 3 files present, ok" in out  # its LICENSE and README are gap_validation's
    assert "3 files checked, 0 changed" in out


def test_verify_names_a_changed_file_and_fetch_replaces_it(
    shared_data_dir: Path, data_dir: Path, capsys: pytest.CaptureFixture
) -> None:
    assert main(["data", "fetch", "gap_validation", "--mirror", str(shared_data_dir)]) == 0
    changed = data_dir / "gap_coreference" / "gap-validation.tsv"
    content = bytearray(changed.read_bytes())
    content[1234] ^= 1
    changed.write_bytes(content)
    capsys.readouterr()
    assert main(["data", "verify"]) == 1
    captured = capsys.readouterr()
    assert "gap_validation: 3 of 3 files present, 1 changed" in captured.out
    assert captured.err == (
        f"error: {changed} is not the manifest's file (its sha256 differs); "
        "`attn-warehouse data fetch gap_validation` replaces it\n"
    )
    assert main(["data", "fetch", "gap_validation", "--mirror", str(shared_data_dir)]) == 0
    assert sha256_of(changed) == "2d784f66b390404f554704b9aef6dcde8845e79dda9886b8391cf7e9a24fdb98"
    assert main(["data", "verify", "gap_validation"]) == 0


def test_a_changed_byte_on_the_mirror_is_refused_and_nothing_is_kept(
    shared_data_dir: Path, data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    mirror = tmp_path / "mirror"
    (mirror / "gap_coreference").mkdir(parents=True)
    for name in GAP_FILES:
        (mirror / name).write_bytes((shared_data_dir / name).read_bytes())
    content = bytearray((mirror / GAP_FILES[2]).read_bytes())
    content[-10] ^= 1
    (mirror / GAP_FILES[2]).write_bytes(content)
    with serving(mirror) as server:
        assert main(["data", "fetch", "gap_validation", "--mirror", server.url]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: gap_coreference/gap-validation.tsv: the download from {server.url}")
    assert "nothing was kept" in err
    assert not (data_dir / GAP_FILES[2]).exists()
    assert not any(name.endswith(".part") for name in files_in(data_dir))


def test_a_partial_download_is_completed_with_a_range_request(
    shared_data_dir: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fetch stopped part-way left `<file>.part`; the next one asks only for the rest (the
    mirror from ATTN_DATA_MIRROR)."""
    part = data_dir / "glue" / "hf_parquet" / "rte_validation.parquet.part"
    part.parent.mkdir(parents=True)
    part.write_bytes((shared_data_dir / "glue" / "hf_parquet" / "rte_validation.parquet").read_bytes()[:50_000])
    with serving(shared_data_dir) as server:
        monkeypatch.setenv("ATTN_DATA_MIRROR", server.url)
        assert main(["data", "fetch", "glue_rte"]) == 0
    assert server.requests == [("glue/hf_parquet/rte_validation.parquet", "bytes=50000-")]
    assert files_in(data_dir) == ["glue/hf_parquet/rte_validation.parquet"]
    assert main(["data", "verify", "glue_rte"]) == 0


def test_an_unknown_corpus_is_one_line_listing_the_known_ones(data_dir: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["data", "fetch", "ud_ewt_test", "wikitext"]) == 2
    err = capsys.readouterr().err
    assert err == f"error: unknown corpus 'wikitext'; the corpora are: {', '.join(load_manifest())}\n"
    assert "ud_ewt_test, ud_gum_dev" in err
    assert not data_dir.exists()  # nothing fetched, not even the known one
    assert main(["data", "fetch"]) == 2
    assert "name the corpora to fetch" in capsys.readouterr().err
    assert main(["data", "fetch", "glue_rte", "--mirror", str(data_dir / "nowhere")]) == 2
    assert "nowhere: no such folder" in capsys.readouterr().err


def test_conll2012_says_how_to_obtain_it(data_dir: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["data", "fetch", "conll2012", "--mirror", str(data_dir.parent)]) == 1
    assert "conll2012: cannot be downloaded. OntoNotes 5.0 comes from the Linguistic Data Consortium" in (
        capsys.readouterr().err
    )


def test_list_shows_every_corpus_its_licence_and_the_command_that_gets_it(
    shared_data_dir: Path, data_dir: Path, capsys: pytest.CaptureFixture
) -> None:
    assert main(["data", "fetch", "glue_wnli", "--mirror", str(shared_data_dir)]) == 0
    capsys.readouterr()
    assert main(["data", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"data directory: {data_dir}"
    rows = {line.split()[0]: line for line in lines[2:29]}
    assert list(rows) == list(load_manifest())
    assert rows["glue_wnli"].split()[1:4] == ["present", "11", "kB"]
    assert rows["ud_ewt_test"].split()[1:5] == ["missing", "1.8", "MB", "Clark"]
    assert re.search(r"  CC BY-SA 4\.0 +attn-warehouse data fetch ud_ewt_test$", rows["ud_ewt_test"])
    assert re.search(r"  Pascual 2021 +CC BY-NC 4\.0 +attn-warehouse data fetch xnli_de$", rows["xnli_de"])
    assert "not downloadable: see below" in rows["conll2012"]
    assert lines[-1].startswith("conll2012: OntoNotes 5.0 comes from the Linguistic Data Consortium")


def test_a_reader_that_stops_early_ends_the_listing_quietly(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`attn-warehouse data list | head -1` once head has gone: SIGPIPE's status, no traceback."""
    reading, writing = os.pipe()
    os.close(reading)  # the reader is gone before anything is written
    closed_pipe = os.fdopen(writing, "w")
    monkeypatch.setattr(sys, "stdout", closed_pipe)
    assert main(["data", "list"]) == 128 + signal.SIGPIPE
    closed_pipe.close()  # writes to /dev/null now: closing does not raise again
