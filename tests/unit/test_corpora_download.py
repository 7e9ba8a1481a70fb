"""Fetching one corpus file (corpora/download.py) from a real HTTP server on 127.0.0.1 serving the
staged data as a mirror: a dropped connection is resumed with a Range request, in the same fetch or
the next one; a server without Range support starts the file over; a file whose bytes are not the
manifest's is refused and nothing is kept; an origin's archive is checked and unpacked."""

import io
import shutil
import tarfile
from pathlib import Path

import pytest

from dagster_project.corpora.download import ATTEMPTS, FetchError, fetch_file, mirror_url
from dagster_project.corpora.manifest import Archive, SourceFile, load_manifest, sha256_of
from tests.mirror_server import serving

GAP = "gap_coreference/gap-validation.tsv"  # 245,089 bytes


def manifest_file(path: str) -> SourceFile:
    return next(file for corpus in load_manifest().values() for file in corpus.files if file.path == path)


def leftovers(folder: Path) -> list[str]:
    return sorted(path.relative_to(folder).as_posix() for path in folder.rglob("*") if path.is_file())


def test_a_dropped_connection_is_resumed_where_it_stopped(shared_data_dir: Path, tmp_path: Path) -> None:
    received: list[int] = []
    with serving(shared_data_dir, cuts={GAP: [100_000]}) as server:
        fetch_file(manifest_file(GAP), tmp_path, mirror_url(server.url), received.append)
    assert server.requests == [(GAP, None), (GAP, "bytes=100000-")]
    assert received[0] == 0 and sum(received) == 245_089
    assert sha256_of(tmp_path / GAP) == "2d784f66b390404f554704b9aef6dcde8845e79dda9886b8391cf7e9a24fdb98"
    assert leftovers(tmp_path) == [GAP]


def test_a_download_cut_short_every_time_is_kept_for_the_next_fetch(shared_data_dir: Path, tmp_path: Path) -> None:
    with serving(shared_data_dir, cuts={GAP: [1000] * ATTEMPTS}) as server:
        with pytest.raises(FetchError, match=f"{GAP}: .* stopped at 3,000 of 245,089 bytes .*resumes it"):
            fetch_file(manifest_file(GAP), tmp_path, mirror_url(server.url), lambda size: None)
        assert leftovers(tmp_path) == [f"{GAP}.part"]
        fetch_file(manifest_file(GAP), tmp_path, mirror_url(server.url), lambda size: None)
    assert server.requests[-1] == (GAP, "bytes=3000-")
    assert leftovers(tmp_path) == [GAP]
    assert (tmp_path / GAP).read_bytes() == (shared_data_dir / GAP).read_bytes()


def test_a_server_without_ranges_starts_the_file_over(shared_data_dir: Path, tmp_path: Path) -> None:
    part = tmp_path / f"{GAP}.part"
    part.parent.mkdir(parents=True)
    part.write_bytes(b"not the file's first bytes")
    received: list[int] = []
    with serving(shared_data_dir, ranges=False) as server:
        fetch_file(manifest_file(GAP), tmp_path, mirror_url(server.url), received.append)
    assert server.requests == [(GAP, "bytes=26-")]
    assert received[:2] == [26, -26] and sum(received) == 245_089
    assert leftovers(tmp_path) == [GAP]


def test_a_changed_byte_is_refused_and_nothing_is_kept(shared_data_dir: Path, tmp_path: Path) -> None:
    mirror = tmp_path / "mirror"
    (mirror / GAP).parent.mkdir(parents=True)
    changed = bytearray((shared_data_dir / GAP).read_bytes())
    changed[5000] ^= 1
    (mirror / GAP).write_bytes(changed)
    data_dir = tmp_path / "data"
    with serving(mirror) as server:
        with pytest.raises(FetchError, match=f"^{GAP}: the download from .* has sha256 .*nothing was kept"):
            fetch_file(manifest_file(GAP), data_dir, mirror_url(server.url), lambda size: None)
    assert leftovers(data_dir) == []


def origin_archive(folder: Path, member: str, content: bytes) -> Path:
    """A .tar.gz holding `content` as `member`, as the XNLI origin serves it."""
    archive = folder / "origin" / f"{Path(member).stem}.tar.gz"
    archive.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive, "w:gz") as tar:
        info = tarfile.TarInfo(member)
        info.size = len(content)
        tar.addfile(info, io.BytesIO(content))
    return archive


@pytest.mark.parametrize("damaged", [False, True])
def test_an_origin_archive_is_checked_and_its_member_unpacked(
    shared_data_dir: Path, tmp_path: Path, damaged: bool
) -> None:
    staged = manifest_file("xnli/xnli_validation_en.tsv")
    content = bytearray((shared_data_dir / staged.path).read_bytes())
    if damaged:
        content[-2] ^= 1
    archive = origin_archive(tmp_path / "server", "xnli_validation_en.tsv", bytes(content))
    data_dir = tmp_path / "data"
    with serving(tmp_path / "server") as server:
        origin = SourceFile(
            path=staged.path,
            url=server.url + "origin/xnli_validation_en.tar.gz",
            size=staged.size,
            sha256=staged.sha256,
            archive=Archive("xnli_validation_en.tsv", archive.stat().st_size, sha256_of(archive)),
        )
        if damaged:
            with pytest.raises(FetchError, match="^xnli/xnli_validation_en.tsv: unpacked from .* has sha256"):
                fetch_file(origin, data_dir, None, lambda size: None)
        else:
            fetch_file(origin, data_dir, None, lambda size: None)
    assert leftovers(data_dir) == ([] if damaged else [staged.path])
    if not damaged:
        assert sha256_of(data_dir / staged.path) == "1c981f6d4a55adabac123738d9b8f8e4b26486fe740df0312eb067e8710dfa54"


def test_a_folder_mirror_is_read_as_a_file_url(shared_data_dir: Path, tmp_path: Path) -> None:
    fetch_file(manifest_file(GAP), tmp_path, mirror_url(str(shared_data_dir)), lambda size: None)
    assert leftovers(tmp_path) == [GAP]
    with pytest.raises(ValueError, match="--mirror .*nowhere: no such folder"):
        mirror_url(str(tmp_path / "nowhere"))


def test_a_missing_file_on_the_mirror_names_it(shared_data_dir: Path, tmp_path: Path) -> None:
    mirror = tmp_path / "mirror"
    shutil.copytree(shared_data_dir / "gap_coreference", mirror / "gap_coreference")
    (mirror / GAP).unlink()
    with serving(mirror) as server:
        with pytest.raises(FetchError, match=f"^{GAP}: http://127.0.0.1:\\d+/{GAP} answered 404"):
            fetch_file(manifest_file(GAP), tmp_path / "data", mirror_url(server.url), lambda size: None)
    assert leftovers(tmp_path / "data") == []
