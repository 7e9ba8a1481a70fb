"""`attn-warehouse export VIEW`: a view or table of the warehouse to a Parquet or CSV file.
`export --all`: every results view, one file each, and a manifest.json saying what is in them."""

import argparse
import json
import os
import sys
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dagster_project.cli.common import UsageError, existing_warehouse, reader_error

if TYPE_CHECKING:
    import duckdb

HELP = "write a view or table of the warehouse to a file, or every results view to a folder (--all)"
MANIFEST = "manifest.json"
DEFAULT_FOLDER = Path("results")
PACKAGE = "attention-warehouse"
EXPORT_BATCH_ROWS = 100_000  # rows per Arrow batch on their way from the reader to the file


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add VIEW or --all, --format (parquet or csv), --out and --model."""
    parser.add_argument("view", nargs="?", help="e.g. clark_coreference_heads")
    parser.add_argument("--all", action="store_true", help=f"every results view, and {MANIFEST}")
    parser.add_argument("--format", choices=["parquet", "csv"], default="parquet")
    parser.add_argument(
        "--out",
        type=Path,
        help=f"the file to write (default: VIEW.FORMAT here); with --all the folder ({DEFAULT_FOLDER})",
    )
    parser.add_argument("--model", help="only this model_id's rows")


def command(args: argparse.Namespace) -> int:
    """Export VIEW, or every results view with --all; a UsageError unless exactly one of the two is given."""
    if args.all == (args.view is not None):
        raise UsageError("name one VIEW to export, or --all for every results view")
    if args.all:
        return export_all(args.format, args.out or DEFAULT_FOLDER, args.model)
    return export(args.view, args.format, args.out, args.model)


def export(view: str, file_format: str, out: Path | None, model_id: str | None) -> int:
    """Write a view (or table) of the warehouse, opened read-only, to a Parquet or CSV file."""
    import difflib

    import duckdb

    from dagster_project.storage.lake import LakeConfigError

    warehouse = existing_warehouse()
    if warehouse is None:
        return 2
    out = out or Path(f"{view}.{file_format}")
    try:
        with warehouse.connect_read_only() as conn:
            names = {name for (name,) in conn.execute("SELECT table_name FROM information_schema.tables").fetchall()}
            if view not in names:
                close = difflib.get_close_matches(view, sorted(names), n=3)
                print(
                    f"error: the warehouse has no view or table '{view}'"
                    + (f" (did you mean {', '.join(close)}?)" if close else "")
                    + '; list them with `attn-warehouse sql "SHOW TABLES"`',
                    file=sys.stderr,
                )
                return 2
            relation = conn.table(view)
            if model_id is not None:
                relation = relation.filter(duckdb.ColumnExpression("model_id") == duckdb.ConstantExpression(model_id))
            rows = len(relation)
            write_file(relation, out, file_format)
    except (duckdb.Error, LakeConfigError, OSError) as error:
        return reader_error(error, warehouse)
    print(f"{out}: {rows} rows of {view}" + (f" for model {model_id}" if model_id else ""))
    return 0


def export_all(file_format: str, folder: Path, model_id: str | None) -> int:
    """Write every results view of sql/results the warehouse has (opened read-only) to `folder`,
    one VIEW.FORMAT file each, and manifest.json (what write_results returns)."""
    import duckdb

    from dagster_project.storage.lake import LakeConfigError

    warehouse = existing_warehouse()
    if warehouse is None:
        return 2
    try:
        folder.mkdir(parents=True, exist_ok=True)
        # The manifest says the folder is whole: the old one goes first and the new one last, so
        # an export that stops midway (a full disk) leaves no manifest beside a mix of files.
        (folder / MANIFEST).unlink(missing_ok=True)
    except OSError as error:
        return _folder_error(folder, error)
    try:
        with warehouse.connect_read_only() as conn:
            manifest = write_results(conn, folder, file_format, model_id)
    except (duckdb.Error, LakeConfigError, OSError) as error:
        return reader_error(error, warehouse)
    manifest = {"warehouse": warehouse.describe(), **manifest}
    try:
        (folder / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    except OSError as error:
        (folder / MANIFEST).unlink(missing_ok=True)
        return _folder_error(folder, error)
    rows = sum(entry["rows"] for entry in manifest["files"])
    print(
        f"{folder}: {len(manifest['files'])} results views, {rows} rows"
        + (f" for model {model_id}" if model_id else "")
    )
    print(f"{folder / MANIFEST}: what each file holds")
    return 0


def _folder_error(folder: Path, error: OSError) -> int:
    """Say in one line why `folder` cannot hold the export; exit status 2."""
    reason = "it is a file" if isinstance(error, FileExistsError | NotADirectoryError) else error.strerror or error
    print(f"error: cannot export into the folder {folder}: {reason}; choose another --out", file=sys.stderr)
    return 2


def write_results(
    conn: "duckdb.DuckDBPyConnection", folder: Path, file_format: str, model_id: str | None
) -> dict[str, Any]:
    """Write each results view present on `conn` to `folder` and return the manifest: when and by
    which code (the package version and the hash of sql/, which makes the views), the run settings
    the warehouse records per (model, corpus) (the models' sources and revisions, the examples'
    count, max_len, seed and overlong), and per file its view, rows, and the models and corpora in it."""
    import duckdb

    from dagster_project.storage.sql_files import sql_code_version, view_definitions

    present = {name for (name,) in conn.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    files = []
    for view in sorted(view.name for view in view_definitions() if view.layer == "results" and view.name in present):
        relation = conn.table(view)
        if model_id is not None:
            relation = relation.filter(duckdb.ColumnExpression("model_id") == duckdb.ConstantExpression(model_id))
        out = folder / f"{view}.{file_format}"
        write_file(relation, out, file_format)
        files.append(
            {
                "file": out.name,
                "view": view,
                "rows": len(relation),
                **{key: _distinct(relation, column) for key, column in (("models", "model_id"), ("corpora", "corpus"))},
            }
        )
    runs = conn.execute(
        "SELECT e.model_id, m.source, m.revision, e.corpus, count(*) AS examples, min(e.max_len) AS max_len, "
        "min(e.seed) AS seed, min(e.overlong) AS overlong "
        "FROM stg_examples AS e LEFT JOIN models AS m USING (model_id) "
        "WHERE $model IS NULL OR e.model_id = $model GROUP BY ALL ORDER BY ALL",
        {"model": model_id},
    ).pl()
    return {
        "exported_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "code": {"package": PACKAGE, "version": metadata.version(PACKAGE), "sql_version": sql_code_version()},
        "format": file_format,
        "model": model_id,
        "runs": runs.to_dicts(),
        "files": files,
    }


def write_file(relation: "duckdb.DuckDBPyRelation", out: Path, file_format: str) -> None:
    """Write `relation` to `out` (parquet or csv) whole or not at all: under a temporary name beside
    it, renamed to `out` once complete, so a write that fails (a full disk) leaves no empty or part
    file. The rows stream from the reader, which opens no file but the warehouse's, into a DuckDB of
    their own that writes the file and runs nothing else."""
    import duckdb

    from dagster_project.storage.lake import NO_DOWNLOADS

    partial = out.with_name(f".{out.name}.{os.getpid()}.partial")
    try:
        with duckdb.connect(":memory:", config=dict(NO_DOWNLOADS)) as writer:
            rows = writer.from_arrow(relation.to_arrow_reader(EXPORT_BATCH_ROWS))
            if file_format == "parquet":
                rows.write_parquet(str(partial))
            else:
                rows.write_csv(str(partial))
        partial.replace(out)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise


def _distinct(relation: "duckdb.DuckDBPyRelation", column: str) -> list:
    """The values of `column` in `relation`, sorted, NULL left out (the scorecard's missing claims have
    no corpus); [] where it has no such column."""
    if column not in relation.columns:
        return []
    return [value for (value,) in relation.select(column).distinct().order(column).fetchall() if value is not None]
