"""Results views at warehouse scale: one real model's partitions replicated under N synthetic model
ids, today's design against the baseline design, both built the same way in this process.

  baseline  the source warehouse as the code at BASELINE_COMMIT wrote it (its schema and fact
            grain), with that commit's sql/ views (plain views over per-example facts)
  current   the same source warehouse opened by this checkout (apply_views: the dense grain's
            migration, the views, the materialized aggregates); refresh_aggregates after each copy

Both arms copy the source model's rows of every partitioned table (every table with model_id and
corpus, `batches` among them) and its `models` row under new model ids, in SQL (one INSERT ...
SELECT per table), so the data is realistic. For each N (default 1, 5, 20; --quick: 1, 5) and arm:
  views   every sql/results view, SELECT * fetched as Arrow: the whole view and filtered to the
          source model (WHERE model_id = ?), median of --repeats runs (fewer when a query's runs
          pass --budget seconds; at least one)
  size    the database file's blocks in use after a CHECKPOINT (a table rewritten by the setup
          leaves free blocks, which a new file would not have), and its bytes per (example, head)
and the growth exponent of each in N: the slope of a least-squares line through (log N, log value).

The source is a warehouse written by the code at BASELINE_COMMIT (or earlier); it is copied, never
opened for writing. One is made by the main command (README) on that commit:
  git worktree add /tmp/baseline 9227481 && cd /tmp/baseline && python3 -m venv .venv \\
    && .venv/bin/pip install -e . && ATTN_WAREHOUSE=/tmp/src.duckdb .venv/bin/attn-warehouse run
Usage (2 cores shared with other jobs, the MiniLM default-corpora warehouse sliced to demo and
xnli_en: --quick 7 to 13 min, the full run 18 to 21 min; all three corpora copy 3.4 times the rows):
  OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE .venv/bin/python -m bench.bench_warehouse SOURCE.duckdb \
    --corpora demo xnli_en [--quick]
Targets, at N = 20: every results view's median query < 1 s whole and < 0.3 s filtered
to one model; the filtered query's exponent in N < 0.2.
"""

import argparse
import io
import shutil
import statistics
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import numpy as np

from dagster_project.settings import PROJECT_ROOT, SQL_DIR
from dagster_project.storage.partition_writes import refresh_aggregates
from dagster_project.storage.schema import PARTITION_COLUMNS, tables_with_columns
from dagster_project.storage.sql_files import view_definitions
from dagster_project.storage.views import apply_views

# The last commit before the materialized aggregates and the dense fact grain.
BASELINE_COMMIT = "9227481"
COPY_PREFIX = "bench-copy-"
FAST_SECONDS, FAST_RUNS_FACTOR = 0.5, 5


def partitioned_tables(conn: duckdb.DuckDBPyConnection) -> dict[str, tuple[str, ...]]:
    """The database's own tables with model_id and corpus (its schema, whichever commit wrote it),
    `batches` among them, with their columns."""
    tables = tables_with_columns(conn)
    return {table: columns for table, columns in tables.items() if set(PARTITION_COLUMNS) <= set(columns)}


def replicate_model(conn: duckdb.DuckDBPyConnection, source_model_id: str, new_model_ids: Sequence[str]) -> None:
    """Copy the source model's rows of every partitioned table, `batches` included, and its `models`
    row under each new model id, in one transaction: one INSERT ... SELECT per table for all the ids.

    A copy's rows keep every value but model_id and batch_id (the source's batch id + ':' + the new
    id, so each copy's partitions have their own current batch), and its `models` row gets the new
    id as `source`, the readable name the views show."""
    if not new_model_ids:
        return
    taken = {row[0] for row in conn.execute("SELECT model_id FROM models").fetchall()}
    if source_model_id not in taken:
        raise LookupError(
            f"model {source_model_id!r} has no row in `models` of this warehouse; models: {sorted(taken)}"
        )
    clashing = sorted(taken.intersection(new_model_ids))
    if clashing:
        raise ValueError(f"model ids already in the warehouse: {clashing}; pick new ones")
    conn.execute("BEGIN TRANSACTION")
    try:
        conn.execute(
            "INSERT INTO models SELECT m.* REPLACE (copy.id AS model_id, copy.id AS source) "
            "FROM models AS m, unnest(?::VARCHAR[]) AS copy(id) WHERE m.model_id = ?",
            [list(new_model_ids), source_model_id],
        )
        for table, columns in partitioned_tables(conn).items():
            replaced = "copy.id AS model_id" + (
                ", t.batch_id || ':' || copy.id AS batch_id" if "batch_id" in columns else ""
            )
            conn.execute(
                f"INSERT INTO {table} SELECT t.* REPLACE ({replaced}) "
                f"FROM {table} AS t, unnest(?::VARCHAR[]) AS copy(id) WHERE t.model_id = ?",
                [list(new_model_ids), source_model_id],
            )
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def baseline_sql(commit: str, destination: Path) -> Path:
    """The sql/ folder of `commit`, written under `destination` (from git, not the work tree)."""
    archive = subprocess.run(
        ["git", "-C", str(PROJECT_ROOT), "archive", "--format=tar", commit, "sql"], capture_output=True, check=True
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(destination, filter="data")
    return destination / "sql"


def apply_baseline_views(conn: duckdb.DuckDBPyConnection, sql_dir: Path) -> list[str]:
    """The baseline's tables (missing ones created, as its ensure_schema did) and views, in one transaction."""
    conn.execute("BEGIN TRANSACTION")
    for path in sorted((sql_dir / "schema").glob("*.sql")):
        conn.execute(path.read_text())
    views = view_definitions(sql_dir)
    for view in views:
        conn.execute(view.sql)
    conn.execute("COMMIT")
    return [view.name for view in views]


@dataclass
class Arm:
    """One design's warehouse file, grown from the source model to N models."""

    name: str
    path: Path
    conn: duckdb.DuckDBPyConnection
    results_views: list[str]
    model_ids: list[str]
    corpora: list[str]
    setup_seconds: float
    # what the design does after facts are copied under new model ids (the copies' corpora given)
    after_copy: Callable[[duckdb.DuckDBPyConnection, list[str], list[str]], None] | None = None
    times: dict[int, dict[str, tuple[float, float]]] = field(default_factory=dict)  # N -> view -> (whole, one model)
    sizes: dict[int, tuple[int, float]] = field(default_factory=dict)  # N -> (bytes used, per (example, head))
    copy_seconds: dict[int, tuple[float, float]] = field(default_factory=dict)  # N -> (copy, after_copy) seconds


def open_arm(
    name: str,
    source: Path,
    work: Path,
    set_up: Callable[[duckdb.DuckDBPyConnection], list[str]],
    sql_dir: Path,
    memory_limit: str,
    corpora: Sequence[str] = (),
) -> Arm:
    """A copy of the source warehouse (only `corpora`'s rows, when given) set up by `set_up`, which
    creates the views of `sql_dir`."""
    path = work / f"{name}.duckdb"
    shutil.copyfile(source, path)
    conn = duckdb.connect(str(path), config={"memory_limit": memory_limit})
    conn.execute("SET enable_progress_bar = false")
    models = [row[0] for row in conn.execute("SELECT model_id FROM models ORDER BY model_id").fetchall()]
    if len(models) != 1:
        raise ValueError(f"{source} holds {len(models)} models ({models}); the bench replicates one model's warehouse")
    present = [row[0] for row in conn.execute("SELECT DISTINCT corpus FROM batches ORDER BY ALL").fetchall()]
    if corpora:
        missing = sorted(set(corpora) - set(present))
        if missing:
            raise ValueError(f"{source} has no rows of corpora {missing}; it has {present}")
        for table in partitioned_tables(conn):
            conn.execute(f"DELETE FROM {table} WHERE NOT list_contains(?, corpus)", [list(corpora)])
        conn.execute("CHECKPOINT")
    results = {path.stem for path in (sql_dir / "results").glob("*.sql")}
    started = time.perf_counter()
    views = [view for view in set_up(conn) if view in results]
    conn.execute("CHECKPOINT")
    return Arm(name, path, conn, views, models, sorted(corpora or present), time.perf_counter() - started)


def refresh_copied_aggregates(conn: duckdb.DuckDBPyConnection, model_ids: list[str], corpora: list[str]) -> None:
    """Today's design after facts are copied by SQL: every copied partition's aggregates recomputed."""
    for model_id in model_ids:
        for corpus in corpora:
            refresh_aggregates(conn, model_id, corpus)


def grow(arm: Arm, n_models: int) -> None:
    """Copy the source model until the arm holds n_models models (then the arm's after_copy step);
    CHECKPOINT and record the file size."""
    new_ids = [f"{COPY_PREFIX}{index:03d}" for index in range(len(arm.model_ids), n_models)]
    started = time.perf_counter()
    replicate_model(arm.conn, arm.model_ids[0], new_ids)
    copied = time.perf_counter()
    if arm.after_copy is not None and new_ids:
        arm.after_copy(arm.conn, new_ids, arm.corpora)
    arm.conn.execute("CHECKPOINT")
    arm.copy_seconds[n_models] = (copied - started, time.perf_counter() - copied)
    arm.model_ids += new_ids
    (example_heads,) = arm.conn.execute(
        "SELECT sum(m.n_layers::BIGINT * m.n_heads) FROM examples AS e JOIN models AS m USING (model_id)"
    ).fetchone()
    # the blocks in use: a table that the setup rewrote (the dense grain's migration) leaves free blocks behind
    (size,) = arm.conn.execute(
        "SELECT used_blocks * block_size FROM pragma_database_size() WHERE database_name = current_database()"
    ).fetchone()
    arm.sizes[n_models] = (size, size / example_heads)


def measure_views(arms: Sequence[Arm], n_models: int, repeats: int, budget: float) -> None:
    """Per results view, median seconds of SELECT * (fetched as Arrow) of the whole view and of the
    source model's rows (WHERE model_id = ?), into each arm's times[n_models]. The arms take turns
    run by run, so a change in the machine's load falls on both. A query runs `repeats` times, more
    (up to FAST_RUNS_FACTOR times as many) while its runs total under FAST_SECONDS, so a query of a
    few milliseconds gets a steady median, and stops once its runs pass `budget` seconds (after one)."""
    for arm in arms:
        arm.times[n_models] = {}
    for view in sorted({view for arm in arms for view in arm.results_views}):
        having = [arm for arm in arms if view in arm.results_views]
        medians = []
        for query in (f"SELECT * FROM {view}", f"SELECT * FROM {view} WHERE model_id = $model_id"):
            runs: dict[str, list[float]] = {arm.name: [] for arm in having}
            for _ in range(repeats * FAST_RUNS_FACTOR):
                for arm in having:
                    taken = runs[arm.name]
                    if taken and (sum(taken) >= budget or (len(taken) >= repeats and sum(taken) >= FAST_SECONDS)):
                        continue
                    parameters = {"model_id": arm.model_ids[0]} if "$model_id" in query else {}
                    started = time.perf_counter()
                    arm.conn.execute(query, parameters).to_arrow_table()
                    runs[arm.name].append(time.perf_counter() - started)
            medians.append({name: statistics.median(times) for name, times in runs.items()})
        for arm in having:
            arm.times[n_models][view] = (medians[0][arm.name], medians[1][arm.name])


def growth_exponent(values: dict[int, float]) -> float:
    """Slope of the least-squares line through (log N, log value): value ~ N ** slope."""
    ns = sorted(values)
    return float(np.polyfit(np.log(ns), np.log([values[n] for n in ns]), 1)[0])


def ratio(current: float, baseline: float) -> str:
    return f"{current / baseline:6.2f}x" if baseline > 0 else "     -"


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def report(baseline: Arm, current: Arm, ns: Sequence[int]) -> None:
    """The figures: per N, baseline / current = ratio; and each one's exponent in N."""
    views = sorted(set(baseline.results_views) | set(current.results_views))
    largest = ns[-1]

    def cell(arm: Arm, n: int, view: str, index: int) -> str:
        return f"{arm.times[n][view][index]:8.3f}" if view in arm.times[n] else f"{'-':>8s}"

    def exponent(arm: Arm, view: str, index: int) -> str:
        if len(ns) < 2 or view not in arm.times[ns[0]]:
            return f"{'-':>5s}"
        return f"{growth_exponent({n: arm.times[n][view][index] for n in ns}):5.2f}"

    print(
        f"\nset-up of the source copy (s): baseline {baseline.setup_seconds:.1f}, current {current.setup_seconds:.1f}"
    )
    print("copying (s): the facts' INSERT ... SELECT, then the design's step after a copy, CHECKPOINT included")
    for arm in (baseline, current):
        print(f"  {arm.name:9s}", "  ".join(f"N={n}: {c:.1f} + {a:.1f}" for n, (c, a) in arm.copy_seconds.items()))
    print("\nsize (the file's blocks in use after CHECKPOINT): baseline / current = ratio; bytes per (example, head)")
    for n in ns:
        (b_bytes, b_per), (c_bytes, c_per) = baseline.sizes[n], current.sizes[n]
        print(
            f"  N={n:3d}: {b_bytes / 1e6:9.1f} MB / {c_bytes / 1e6:9.1f} MB = {ratio(c_bytes, b_bytes)}; "
            f"{b_per:7.1f} B / {c_per:7.1f} B"
        )
    if len(ns) > 1:
        b_slope = growth_exponent({n: baseline.sizes[n][0] for n in ns})
        c_slope = growth_exponent({n: current.sizes[n][0] for n in ns})
        print(f"  exponent in N: baseline {b_slope:.2f}, current {c_slope:.2f}")
    for scope, index, target in (("whole view", 0, 1.0), ("filtered to one model", 1, 0.3)):
        print(f"\nresults views, {scope}: median s, baseline / current = ratio; exponent in N: baseline / current")
        print(f"  {'view':34s}" + "".join(f"{'N=' + str(n):>31s}" for n in ns) + "     exponent")
        for view in views:
            cells = "".join(
                f"  {cell(baseline, n, view, index)} / {cell(current, n, view, index)} = "
                + (
                    ratio(current.times[n][view][index], baseline.times[n][view][index])
                    if view in baseline.times[n] and view in current.times[n]
                    else f"{'-':>7s}"
                )
                for n in ns
            )
            print(f"  {view:34s}{cells}   {exponent(baseline, view, index)} / {exponent(current, view, index)}")
        for n in ns:
            b_times = [times[index] for times in baseline.times[n].values()]
            c_times = [times[index] for times in current.times[n].values()]
            total = f"{sum(b_times):8.2f} s / {sum(c_times):7.2f} s = {ratio(sum(c_times), sum(b_times))}"
            print(f"  N={n:3d}: all views {total}; slowest view {max(b_times):.3f} s / {max(c_times):.3f} s")
        if len(ns) > 1:
            slopes = {
                view: growth_exponent({n: current.times[n][view][index] for n in ns}) for view in current.results_views
            }
            steepest = max(slopes, key=slopes.get)
            print(f"  current design's largest exponent: {slopes[steepest]:.2f} ({steepest})")
        slow = [view for view in current.results_views if current.times[largest][view][index] >= target]
        verdict = "met" if not slow else "NOT met: " + ", ".join(slow)
        print(f"  target at N={largest}: every view < {target} s: {verdict}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source", type=Path, help=f"a one-model warehouse written by the code at {BASELINE_COMMIT}")
    parser.add_argument("--models", type=int, nargs="+", default=[1, 5, 20], help="the N values (default 1 5 20)")
    parser.add_argument("--quick", action="store_true", help="N = 1, 5")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--budget", type=float, default=10.0, help="seconds of a query's runs after which it stops")
    parser.add_argument("--corpora", nargs="+", default=[], help="only these corpora of the source (default: all)")
    parser.add_argument("--memory-limit", default="12GB", help="DuckDB memory_limit of each arm's connection")
    parser.add_argument("--work", type=Path, help="folder for the two warehouse copies (default: a temporary one)")
    args = parser.parse_args()
    if not args.source.is_file():
        parser.error(f"no warehouse at {args.source}: make one as this script's docstring says (--help)")
    ns = [1, 5] if args.quick else sorted(set(args.models))
    if ns[0] < 1:
        parser.error("--models: every N is at least 1")

    work = args.work or Path(tempfile.mkdtemp(prefix="bench-warehouse-"))
    work.mkdir(parents=True, exist_ok=True)
    old_sql = baseline_sql(BASELINE_COMMIT, work / "baseline")
    try:
        baseline = open_arm(
            "baseline",
            args.source,
            work,
            lambda conn: apply_baseline_views(conn, old_sql),
            old_sql,
            args.memory_limit,
            args.corpora,
        )
        current = open_arm("current", args.source, work, apply_views, SQL_DIR, args.memory_limit, args.corpora)
        current.after_copy = refresh_copied_aggregates
        print(f"source {args.source}: model {baseline.model_ids[0]}, corpora {', '.join(baseline.corpora)}")
        print(f"load before: {uptime()}", flush=True)
        for n in ns:
            for arm in (baseline, current):
                grow(arm, n)
            measure_views((baseline, current), n, args.repeats, args.budget)
            print(f"N={n} measured; load: {uptime()}", flush=True)
        report(baseline, current, ns)
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
