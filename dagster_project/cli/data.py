"""`attn-warehouse data list | fetch | verify`: the corpora of the papers in the data directory
(settings.data_dir: ATTN_DATA_DIR, ../shared/data in a checkout that has it, else the user's data
folder). `list` says which are present, missing or corrupt; `fetch` downloads them from their
origins, or from a mirror (--mirror or ATTN_DATA_MIRROR: an http(s) URL or a folder laid out like
the data directory), checking every sha256; `verify` checks the files that are there. Every
corpus's files, origins, hashes, licence and citation are in corpora/manifest.yaml."""

import argparse
import os
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING

from dagster_project import settings
from dagster_project.cli.common import UsageError

if TYPE_CHECKING:
    from dagster_project.corpora.manifest import CorpusSource

HELP = "list, fetch (from the origins or a mirror) and verify the corpora of the papers"
MIRROR_SETTING = "ATTN_DATA_MIRROR"


def _size(size: int) -> str:
    return f"{size / 1e6:.1f} MB" if size >= 1e6 else f"{size / 1e3:.0f} kB" if size else "-"


def _chosen(names: list[str], every: bool, verb: str) -> list["CorpusSource"]:
    """The manifest's corpora named on the command line (all of them with `every`)."""
    from dagster_project.corpora.manifest import load_manifest

    manifest = load_manifest()
    unknown = [name for name in names if name not in manifest]
    if unknown:
        raise UsageError(f"unknown corpus {', '.join(map(repr, unknown))}; the corpora are: {', '.join(manifest)}")
    if every:
        return list(manifest.values())
    if not names:
        raise UsageError(f"name the corpora to {verb} (`attn-warehouse data list` shows them), or give --all")
    return [manifest[name] for name in dict.fromkeys(names)]


def list_corpora() -> int:
    """One row per corpus: status in the data directory, size, papers, licence, and how to get it."""
    from dagster_project.corpora.manifest import FETCH_COMMAND, MISSING, PRESENT, corpus_status, load_manifest

    data_dir = settings.data_dir()
    print(f"data directory: {data_dir}")
    statuses = {name: corpus_status(data_dir, corpus) for name, corpus in load_manifest().items()}
    rows = [("corpus", "status", "size", "papers", "licence", "get it")]
    for corpus in load_manifest().values():
        status = statuses[corpus.name]
        fetch = f"{FETCH_COMMAND} {corpus.name}" if corpus.downloadable else "not downloadable: see below"
        papers = ", ".join(corpus.papers) or "(outside the papers)"
        rows.append(
            (corpus.name, status, _size(corpus.size), papers, corpus.licence, "" if status == PRESENT else fetch)
        )
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]) - 1)]
    for row in rows:
        print("  ".join(value.ljust(width) for value, width in zip(row, widths)) + "  " + row[-1])
    print(f"demo: built in, needs no data. Every missing corpus at once: {FETCH_COMMAND} --all")
    for corpus in load_manifest().values():
        if not corpus.downloadable and statuses[corpus.name] == MISSING:
            print(f"{corpus.name}: {corpus.obtain}")
    return 0


def _grouped(pairs: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    """Values with the names that share each, in first-seen order."""
    groups: dict[str, list[str]] = {}
    for name, value in pairs:
        groups.setdefault(value, []).append(name)
    return groups


def fetch(names: list[str], every: bool, mirror: str | None) -> int:
    """Download what is missing or corrupt of the chosen corpora; prints each licence and citation
    once. Exit status 1 when a file could not be fetched (the others are kept)."""
    from tqdm import tqdm

    from dagster_project.corpora.download import FetchError, fetch_file, mirror_url
    from dagster_project.corpora.manifest import PRESENT, file_status

    corpora = _chosen(names, every, "fetch")
    try:
        base = mirror_url(mirror) if mirror else None
    except ValueError as error:
        raise UsageError(str(error)) from error
    data_dir = settings.data_dir()
    print(f"data directory: {data_dir}")
    print(f"from: {f'the mirror {mirror}' if base else 'the origins in the manifest'}")
    failed = False
    for corpus in corpora:
        wanted = [file for file in corpus.files if file_status(data_dir, file) != PRESENT]
        if not wanted:
            print(f"{corpus.name}: present")
            continue
        if not corpus.downloadable:
            named = corpus.name in names  # a failure when asked for, a note in --all
            print(f"{corpus.name}: cannot be downloaded. {corpus.obtain}", file=sys.stderr if named else sys.stdout)
            failed = failed or named
            continue
        size = sum(file.size for file in wanted)
        with tqdm(total=size, unit="B", unit_scale=True, desc=corpus.name, disable=None, leave=False) as bar:
            try:
                for file in wanted:
                    fetch_file(file, data_dir, base, bar.update)
            except FetchError as error:
                bar.close()
                print(f"error: {error}", file=sys.stderr)
                failed = True
                continue
        print(f"{corpus.name}: fetched {len(wanted)} file{'s' if len(wanted) != 1 else ''} ({_size(size)})")
    downloadable = [corpus for corpus in corpora if corpus.downloadable]
    for licence, holders in _grouped((corpus.name, corpus.licence) for corpus in downloadable).items():
        print(f"licence of {', '.join(holders)}: {licence}")
    for citation, holders in _grouped((corpus.name, corpus.citation) for corpus in downloadable).items():
        print(f"cite for {', '.join(holders)}: {citation}")
    return 1 if failed else 0


def verify(names: list[str]) -> int:
    """Check the sha256 of every file of the chosen corpora (all without names) that is in the data
    directory, each file once; exit status 1 naming every file that changed."""
    from dagster_project.corpora.manifest import CORRUPT, FETCH_COMMAND, MISSING, file_status

    corpora = _chosen(names, not names, "verify")
    data_dir = settings.data_dir()
    print(f"data directory: {data_dir}")
    statuses = {file.path: file_status(data_dir, file) for corpus in corpora for file in corpus.files}
    changed: dict[str, str] = {}  # path -> the first corpus holding it
    absent = []
    for corpus in corpora:
        found = [file.path for file in corpus.files if statuses[file.path] != MISSING]
        if not found:
            absent.append(corpus.name)
            continue
        corrupt = [path for path in found if statuses[path] == CORRUPT]
        for path in corrupt:
            changed.setdefault(path, corpus.name)
        state = f"{len(corrupt)} changed" if corrupt else "ok"
        print(f"{corpus.name}: {len(found)} of {len(corpus.files)} files present, {state}")
    if absent:
        print(f"not in the data directory: {', '.join(absent)}")
    for path, name in changed.items():
        print(
            f"error: {data_dir / path} is not the manifest's file (its sha256 differs); `{FETCH_COMMAND} {name}` "
            "replaces it",
            file=sys.stderr,
        )
    checked = sum(status != MISSING for status in statuses.values())
    print(f"{checked} files checked, {len(changed)} changed")
    return 1 if changed else 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the actions `list`, `fetch` (CORPUS..., --all, --mirror) and `verify` (CORPUS...)."""
    actions = parser.add_subparsers(dest="action", required=True)
    actions.add_parser(
        "list", help="every corpus: present, missing or corrupt, size, papers, licence, and the command that gets it"
    )
    fetching = actions.add_parser(
        "fetch", help="download corpora into the data directory, checking every sha256; resumes a partial download"
    )
    fetching.add_argument("corpora", nargs="*", metavar="CORPUS", help="corpus names, as `run --corpus` takes them")
    fetching.add_argument("--all", action="store_true", help="every corpus that can be downloaded")
    fetching.add_argument(
        "--mirror",
        metavar="URL_OR_DIR",
        help=f"an http(s) URL or a folder laid out like the data directory, instead of the origins (default: "
        f"{MIRROR_SETTING} when set)",
    )
    checking = actions.add_parser("verify", help="check the sha256 of the corpus files in the data directory")
    checking.add_argument("corpora", nargs="*", metavar="CORPUS", help="corpus names (default: every corpus)")


def command(args: argparse.Namespace) -> int:
    """Run the chosen action (`fetch` from ATTN_DATA_MIRROR when set and no --mirror is given); its exit status."""
    if args.action == "list":
        return list_corpora()
    if args.action == "fetch":
        return fetch(args.corpora, args.all, args.mirror or os.environ.get(MIRROR_SETTING) or None)
    return verify(args.corpora)
