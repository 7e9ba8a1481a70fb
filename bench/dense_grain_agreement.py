"""Every results view on the flat grain and on the dense grain of the same facts, compared.

The facts of a warehouse written in the flat grain (one row per offset or word, as before the
dense grain) are read twice through the same views, those of --flat-rev (the last revision with
the flat grain): as they are, and migrated to the dense grain (storage/dense_grain.migrate_flat_tables,
what opening an old warehouse does) with the stg_ views of the dense tables taken from
--dense-rev. So only the storage differs. The revisions' SQL comes from `git archive`; both
sides create plain views only. Per results view: row counts, and the
largest absolute and relative difference of every floating-point column, rows matched on the
other columns, and the query time on each side. Agreement: |dense - flat| <= 1e-6 * max(1, |flat|) everywhere.

Usage: python bench/dense_grain_agreement.py WAREHOUSE [--flat-rev REV] [--dense-rev REV] [--work DIR]
(WAREHOUSE is only read; it is copied to DIR, default a temporary directory, twice.)
"""

import argparse
import shutil
import subprocess
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

import duckdb
import polars as pl

from dagster_project.storage import schema, sql_files
from dagster_project.storage.dense_grain import DENSE_TABLES, migrate_flat_tables

TOLERANCE = 1e-6


def sql_at(revision: str, into: Path) -> Path:
    """The repository's sql/ directory at `revision`, extracted under `into`."""
    archive = subprocess.run(["git", "archive", revision, "sql"], check=True, capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into / "sql"


def create_views(conn: duckdb.DuckDBPyConnection, sql_dir: Path, staging: Path | None = None) -> list[str]:
    """The tables the warehouse lacks and the views of `sql_dir` (in warehouse.view_definitions' order),
    the stg_ views of the dense tables from `staging` when given; returns the results views.
    Nothing is migrated: each side keeps its grain."""
    views = sql_files.view_definitions(sql_dir)
    for path in sorted((sql_dir / "schema").glob("*.sql")):
        conn.execute(path.read_text())
    for table, columns in schema.tables_with_columns(conn).items():
        if {"model_id", "corpus"} <= set(columns) and table != schema.BATCHES_TABLE:
            conn.execute(f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS batch_id VARCHAR")
    dense_staging = {f"stg_{table}" for table in DENSE_TABLES}
    for view in views:
        if staging is not None and view.name in dense_staging:
            conn.execute((staging / f"{view.name}.sql").read_text())
        else:
            conn.execute(view.sql)
    return [view.name for view in views if view.layer == "results"]


def compare(flat: pl.DataFrame, dense: pl.DataFrame) -> tuple[float, float]:
    """Largest absolute and relative difference of the float columns, rows sorted on every column
    (floats rounded to 1e-4 in the sort key, so the order does not depend on the last bits)."""
    floats = [name for name, kind in flat.schema.items() if kind.is_float()]
    others = [name for name, kind in flat.schema.items() if not kind.is_float() and not kind.is_nested()]
    key = [*others, *(pl.col(name).round(4) for name in floats)]
    flat, dense = flat.sort(key, nulls_last=True), dense.sort(key, nulls_last=True)
    if not flat.select(others).equals(dense.select(others)):
        return float("inf"), float("inf")
    worst_absolute = worst_relative = 0.0
    for name in floats:
        difference = (dense[name].cast(pl.Float64) - flat[name].cast(pl.Float64)).abs()
        scale = flat[name].cast(pl.Float64).abs()
        worst_absolute = max(worst_absolute, difference.max() or 0.0)
        worst_relative = max(worst_relative, (difference / scale.clip(lower_bound=1.0)).max() or 0.0)
    return worst_absolute, worst_relative


def timed_query(conn: duckdb.DuckDBPyConnection, view: str) -> tuple[pl.DataFrame, float]:
    started = time.perf_counter()
    rows = conn.execute(f"SELECT * FROM {view}").pl()
    return rows, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("warehouse", type=Path)
    parser.add_argument("--flat-rev", default="157b64f~1", help="a revision with the flat grain's schema and views")
    parser.add_argument("--dense-rev", default="HEAD", help="a revision with this code's dense grain")
    parser.add_argument("--work", type=Path, default=None)
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="dense_grain_"))
    flat_sql, dense_sql = sql_at(args.flat_rev, work / "flat"), sql_at(args.dense_rev, work / "dense")
    sides = {}
    for side in ("flat", "dense"):
        database = work / f"{side}.duckdb"
        shutil.copy(args.warehouse, database)
        conn = duckdb.connect(str(database))
        if side == "dense":
            started = time.perf_counter()
            migrated = migrate_flat_tables(conn, schema.tables_with_columns(conn))
            print(f"migrated {migrated} in {time.perf_counter() - started:.1f} s", flush=True)
        sides[side] = (conn, create_views(conn, flat_sql, dense_sql / "staging" if side == "dense" else None))
    (flat, views), (dense, dense_views) = sides["flat"], sides["dense"]
    worst = 0.0
    for view in sorted(set(views) & set(dense_views)):
        (a, flat_seconds), (b, dense_seconds) = (timed_query(conn, view) for conn in (flat, dense))
        absolute, relative = compare(a, b) if a.height == b.height else (float("inf"), float("inf"))
        worst = max(worst, relative)
        print(
            f"{view:34s} rows {a.height:6d} / {b.height:6d}  max |diff| {absolute:.1e}  max rel {relative:.1e}  "
            f"query {flat_seconds:5.2f} s / {dense_seconds:5.2f} s"
        )
    verdict = "agree" if worst <= TOLERANCE else "DISAGREE"
    print(f"every results view: {verdict} (largest |dense - flat| / max(1, |flat|) = {worst:.2e}, tolerance 1e-6)")


if __name__ == "__main__":
    main()
