"""The corpus manifest (corpora/manifest.yaml): an entry for every registered corpus that has files
and for nothing else, holding one of each of the corpus's files (or alternatives); the papers it
names agree with the registry; every file has a pinned origin, a size and a sha256, and the staged
copies in the shared data directory are those files, byte for byte; docs/corpora.md lists every
corpus with the manifest's licence and citation."""

import re
from pathlib import Path

import pytest

from dagster_project.corpora import CORPORA
from dagster_project.corpora.manifest import (
    CORRUPT,
    MISSING,
    PRESENT,
    corpus_status,
    how_to_get,
    load_manifest,
    sha256_of,
)
from dagster_project.settings import PROJECT_ROOT

MANIFEST = load_manifest()
PAPERS = {"Clark 2019", "Kovaleva 2019", "Pascual 2021"}


def test_every_registered_corpus_with_files_has_an_entry_and_nothing_else_has() -> None:
    assert set(MANIFEST) == {name for name, spec in CORPORA.items() if spec.files}
    assert len(MANIFEST) == 27 and "demo" not in MANIFEST


@pytest.mark.parametrize("name", list(MANIFEST))
def test_an_entry_holds_one_of_each_of_the_corpus_files(name: str) -> None:
    paths = {file.path for file in MANIFEST[name].files}
    for entry in CORPORA[name].files:
        assert paths & set((entry,) if isinstance(entry, str) else entry), entry


def test_the_papers_agree_with_the_registry() -> None:
    for name, corpus in MANIFEST.items():
        assert set(corpus.papers) <= PAPERS, name
        assert (not corpus.papers) == CORPORA[name].outside_papers, name


def test_every_file_has_a_pinned_origin_a_size_and_a_sha256() -> None:
    files = {file.path: file for corpus in MANIFEST.values() for file in corpus.files}
    assert len(files) == 305
    for path, file in files.items():
        if path == "conll2012/dev.english.v4_gold_conll":
            assert (file.url, file.size, file.sha256) == (None, None, None)
            continue
        assert re.fullmatch(r"https://raw\.githubusercontent\.com/[\w.-]+/[\w.-]+/[0-9a-f]{40}/\S+", file.url), path
        assert file.size > 0 and re.fullmatch(r"[0-9a-f]{64}", file.sha256) and file.licence, path
        if file.archive:
            assert file.url.endswith(f"/{Path(path).stem}.tar.gz") and file.archive.member == Path(path).name
    assert [name for name, corpus in MANIFEST.items() if not corpus.downloadable] == ["conll2012"]
    assert sum(file.archive is not None for file in files.values()) == 6  # the XNLI files


def test_the_staged_files_are_the_manifests(shared_data_dir: Path) -> None:
    files = {file.path: file for corpus in MANIFEST.values() for file in corpus.files if file.sha256}
    for path, file in files.items():
        staged = shared_data_dir / path
        assert (staged.stat().st_size, sha256_of(staged)) == (file.size, file.sha256), path


def test_a_corpus_status_is_present_missing_or_corrupt(shared_data_dir: Path, tmp_path: Path) -> None:
    corpus = MANIFEST["gap_validation"]
    assert corpus_status(shared_data_dir, corpus) == PRESENT
    assert corpus_status(tmp_path, corpus) == MISSING
    (tmp_path / "gap_coreference").mkdir()
    for file in corpus.files:
        (tmp_path / file.path).write_bytes((shared_data_dir / file.path).read_bytes())
    with (tmp_path / "gap_coreference" / "LICENSE").open("ab") as licence:
        licence.write(b"\n")
    assert corpus_status(tmp_path, corpus) == CORRUPT


def test_how_to_get_names_the_command_and_what_cannot_be_downloaded() -> None:
    assert how_to_get(["ud_ewt_test"]) == "get it with `attn-warehouse data fetch ud_ewt_test`"
    assert how_to_get(["xnli_en", "conll2012", "ontogum"]) == (
        "get them with `attn-warehouse data fetch xnli_en ontogum`; conll2012 cannot be downloaded: "
        "`attn-warehouse data list` says how to obtain it"
    )


def test_the_corpora_page_lists_every_corpus_with_its_licence_and_citation() -> None:
    page = (PROJECT_ROOT / "docs" / "corpora.md").read_text(encoding="utf-8")
    rows = {row.split(" | ")[0].strip("|` "): row for row in re.findall(r"^\| `\w+` \|.*$", page, re.MULTILINE)}
    assert list(rows) == list(MANIFEST)
    for name, corpus in MANIFEST.items():
        assert rows[name].endswith(f" | {corpus.licence} |"), name
        assert corpus.citation in page, name
