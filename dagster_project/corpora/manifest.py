"""Where each corpus comes from: manifest.yaml, shipped in the package, keyed by the corpus names of
`CORPORA`, gives every file's origin at a pinned commit, size, sha256 and licence, and each
corpus's papers, licence and citation. `attn-warehouse data` lists, fetches and verifies from it."""

import hashlib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import yaml

MANIFEST_FILE = Path(__file__).with_name("manifest.yaml")
FETCH_COMMAND = "attn-warehouse data fetch"
# What `corpus_status` and `file_status` say.
PRESENT, MISSING, CORRUPT = "present", "missing", "corrupt"


@dataclass(frozen=True)
class Archive:
    """The origin serves a .tar.gz holding the file as `member`; size and sha256 are the archive's."""

    member: str
    size: int
    sha256: str


@dataclass(frozen=True)
class SourceFile:
    """One file of the data directory: its path there, where it comes from and what it must hash to.
    A file of a corpus that cannot be downloaded (CorpusSource.obtain) has no url, size or sha256."""

    path: str
    url: str | None = None
    size: int | None = None
    sha256: str | None = None
    licence: str | None = None
    archive: Archive | None = None


@dataclass(frozen=True)
class CorpusSource:
    name: str
    title: str
    papers: tuple[str, ...]  # whose results need it; empty: outside the papers
    licence: str
    citation: str
    files: tuple[SourceFile, ...]
    obtain: str | None = None  # how to get a corpus that cannot be downloaded, and where to put it

    @property
    def downloadable(self) -> bool:
        return self.obtain is None

    @property
    def size(self) -> int:
        return sum(file.size or 0 for file in self.files)


@cache
def load_manifest() -> dict[str, CorpusSource]:
    """Every corpus of the manifest, in its order, by name."""
    raw = yaml.safe_load(MANIFEST_FILE.read_text(encoding="utf-8"))
    records = raw["files"]

    def source_file(path: str) -> SourceFile:
        record = dict(records.get(path, {}))
        archive = record.pop("archive", None)
        return SourceFile(path=path, **record, archive=Archive(**archive) if archive else None)

    return {
        name: CorpusSource(
            name=name,
            title=entry["title"],
            papers=tuple(entry["papers"]),
            licence=entry["licence"],
            citation=entry["citation"],
            files=tuple(source_file(path) for path in entry["files"]),
            obtain=entry.get("obtain"),
        )
        for name, entry in raw["corpora"].items()
    }


def sha256_of(path: Path) -> str:
    """The hex sha256 of a file's bytes."""
    with path.open("rb") as stream:
        return hashlib.file_digest(stream, "sha256").hexdigest()


def file_status(data_dir: Path, file: SourceFile) -> str:
    """PRESENT (there, and its sha256 is the manifest's where it has one), MISSING or CORRUPT."""
    path = data_dir / file.path
    if not path.is_file():
        return MISSING
    if file.sha256 is None:
        return PRESENT
    return PRESENT if sha256_of(path) == file.sha256 else CORRUPT


def corpus_status(data_dir: Path, corpus: CorpusSource) -> str:
    """CORRUPT when a file of the corpus does not hash as it should, else MISSING when a file is
    absent, else PRESENT."""
    statuses = {file_status(data_dir, file) for file in corpus.files}
    return CORRUPT if CORRUPT in statuses else MISSING if MISSING in statuses else PRESENT


def how_to_get(names: list[str]) -> str:
    """The command that fetches the corpora `names`, and which of them cannot be downloaded."""
    manifest = load_manifest()
    downloadable = [name for name in names if manifest[name].downloadable]
    others = [name for name in names if not manifest[name].downloadable]
    parts = []
    if downloadable:
        pronoun = "it" if len(downloadable) == 1 else "them"
        parts.append(f"get {pronoun} with `{FETCH_COMMAND} {' '.join(downloadable)}`")
    if others:
        parts.append(f"{', '.join(others)} cannot be downloaded: `attn-warehouse data list` says how to obtain it")
    return "; ".join(parts)
