"""Fetching a corpus file into the data directory, from its origin (manifest.yaml) or from a mirror laid
out like the data directory (an http(s) URL or a folder). The bytes go to `<file>.part`, which a
dropped connection leaves for the next attempt to resume (an HTTP Range request); the file is moved
into place only once its sha256 is the manifest's, and a mismatch keeps nothing. Where the origin
serves an archive, the archive is checked the same way and the file unpacked from it."""

import http.client
import os
import re
import tarfile
from collections.abc import Callable
from pathlib import Path
from urllib.error import HTTPError
from urllib.parse import quote
from urllib.request import Request, urlopen

from dagster_project.corpora.manifest import SourceFile, sha256_of

ATTEMPTS = 3  # per file: a dropped connection is resumed this many times before the file is given up
TIMEOUT_SECONDS = 60
BLOCK_BYTES = 1 << 16


class FetchError(RuntimeError):
    """A file could not be downloaded, or its bytes are not the manifest's; the message names it."""


def mirror_url(mirror: str) -> str:
    """The base URL of a mirror given as an http(s) URL or as a folder; ValueError for a folder that
    does not exist."""
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", mirror):
        return mirror.rstrip("/") + "/"
    folder = Path(mirror).expanduser().resolve()
    if not folder.is_dir():
        raise ValueError(
            f"--mirror {mirror}: no such folder; a mirror is an http(s) URL or a folder laid out like the data "
            "directory"
        )
    return folder.as_uri() + "/"


def fetch_file(file: SourceFile, data_dir: Path, mirror: str | None, progress: Callable[[int], None]) -> None:
    """Download `file` into `data_dir` from `mirror` (a base URL, mirror_url) or else its origin, check
    its sha256 and move it into place; `progress` gets the number of bytes each block adds (negative
    when a download that cannot resume starts over)."""
    target = data_dir / file.path
    target.parent.mkdir(parents=True, exist_ok=True)
    archive = None if mirror else file.archive
    url = mirror + quote(file.path) if mirror else file.url
    size, sha256 = (archive.size, archive.sha256) if archive else (file.size, file.sha256)
    download = target.with_name(f"{target.name}.{'archive.' if archive else ''}part")
    _download(url, download, size, progress, file.path)
    _check(download, sha256, f"{file.path}: the download from {url}")
    if archive is None:
        os.replace(download, target)
        return
    unpacked = target.with_name(f"{target.name}.part")
    try:
        with tarfile.open(download, "r:gz") as tar, tar.extractfile(archive.member) as member:
            unpacked.write_bytes(member.read())
    except (KeyError, tarfile.TarError) as error:
        raise FetchError(f"{file.path}: {archive.member} not found in the archive {url} ({error})") from error
    finally:
        download.unlink()
    _check(unpacked, file.sha256, f"{file.path}: unpacked from {url}, it")
    os.replace(unpacked, target)


def _check(path: Path, sha256: str, what: str) -> None:
    """Nothing, when `path` hashes to `sha256`; else `path` is deleted and a FetchError says `what` hashed to."""
    found = sha256_of(path)
    if found != sha256:
        path.unlink()
        raise FetchError(
            f"{what} has sha256 {found}, not the manifest's {sha256}: nothing was kept (a changed origin or a "
            "damaged mirror; a mirror's file must be the data directory's, byte for byte)"
        )


def _download(url: str, part: Path, size: int, progress: Callable[[int], None], name: str) -> None:
    """`part` holding the `size` bytes at `url`, resumed from what it holds; a dropped connection is
    resumed up to ATTEMPTS times, then the part is kept for the next fetch and a FetchError says so."""
    problem: BaseException | None = None
    progress(part.stat().st_size if part.is_file() else 0)  # a resumed download's bar starts at what it holds
    for _ in range(ATTEMPTS):
        held = part.stat().st_size if part.is_file() else 0
        if held >= size:  # complete (a longer file is refused by its hash)
            return
        try:
            _receive(url, part, held, progress)
        except HTTPError as error:
            if error.code == 416 and held:  # the part is longer than the file served: start over
                part.unlink()
                progress(-held)
                continue
            raise FetchError(f"{name}: {url} answered {error.code} {error.reason}") from error
        except (OSError, http.client.HTTPException) as error:  # refused, reset, timed out, cut short
            problem = error
    held = part.stat().st_size if part.is_file() else 0
    if held >= size:
        return
    if not held:
        raise FetchError(f"{name}: cannot download {url} ({problem})")
    raise FetchError(
        f"{name}: the download from {url} stopped at {held:,} of {size:,} bytes ({problem}); "
        "the same command resumes it from there"
    )


def _receive(url: str, part: Path, held: int, progress: Callable[[int], None]) -> None:
    """Append the bytes of `url` after the first `held` to `part` (a Range request); a server that
    sends the whole file instead starts `part` over."""
    request = Request(url, headers={"Range": f"bytes={held}-"} if held else {})
    with urlopen(request, timeout=TIMEOUT_SECONDS) as response:
        resumed = held and response.status == 206
        if held and not resumed:
            progress(-held)
        with part.open("ab" if resumed else "wb") as stream:
            for block in iter(lambda: response.read(BLOCK_BYTES), b""):
                stream.write(block)
                progress(len(block))
