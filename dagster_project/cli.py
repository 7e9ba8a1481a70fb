"""`attn-warehouse`: run the main job, register models, query the warehouse, open the UI.

Sets DAGSTER_HOME to the project's .dagster folder unless it is set, so partitions and
run history persist between commands and the UI.
"""

import argparse
import os
import shlex
import sys
from pathlib import Path

from dagster_project import settings


def _use_project_instance() -> None:
    home = settings.dagster_home()
    home.mkdir(parents=True, exist_ok=True)
    os.environ["DAGSTER_HOME"] = str(home)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def _told_error(error: BaseException) -> BaseException | None:
    """The warehouse error behind `error` (Dagster wraps what an asset raised), if any: one whose
    message says what to do, printed as one line without a traceback."""
    from dagster_project.storage.warehouse import WarehouseFullError, WarehouseLockedError

    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, (WarehouseLockedError, WarehouseFullError)):
            return current
        seen.add(id(current))
        current = getattr(current, "user_exception", None) or current.__cause__ or current.__context__
    return None


def run(source: str, corpus_names: list[str], analysis_names: list[str]) -> int:
    """Register `source` and run the chosen analyses (defs.jobs.ANALYSES) for it on the chosen
    corpora whose files are in the data directory, then write the static report."""
    from dagster import AssetSelection, DagsterInstance, materialize

    from dagster_project.compute.models import ModelLoadError
    from dagster_project.corpora import CORPORA, present_corpora
    from dagster_project.defs.assets import all_assets, warehouse_views
    from dagster_project.defs.assets.report import paper_report
    from dagster_project.defs.jobs import ANALYSES, analysis_asset_keys
    from dagster_project.defs.registration import register_model
    from dagster_project.defs.resources import default_resources
    from dagster_project.defs.runs import announce_pool_waits, reclaim_dead_runs, stop_on_interrupt

    resources = default_resources()
    instance = DagsterInstance.get()
    stop_on_interrupt(instance)
    announce_pool_waits(instance)
    for message in reclaim_dead_runs(instance):  # a killed run's pool slot would block this one forever
        print(message)
    data_dir = resources["data_dir"].root
    present = present_corpora(data_dir)
    for name in corpus_names:
        if name not in present:
            print(f"skipping corpus {name}: {CORPORA[name].missing_files(data_dir)[0]} not found (set ATTN_DATA_DIR)")
    corpora = [name for name in corpus_names if name in present]
    if not corpora:
        print(
            f"error: no corpus found: none of {', '.join(corpus_names)} has its files in the data directory "
            f"{data_dir}. Point ATTN_DATA_DIR to the folder holding the corpora (laid out like ../shared/data), "
            f"e.g. `ATTN_DATA_DIR=/path/to/data attn-warehouse run {shlex.quote(source)}`, "
            "or add `--corpus demo` for the built-in demo pairs.",
            file=sys.stderr,
        )
        return 2
    keys = {key for name in analysis_names for key in analysis_asset_keys(ANALYSES[name], corpora, present)}
    if not keys:
        print(
            f"error: nothing to run: the analyses {', '.join(analysis_names)} need corpora other than "
            f"{', '.join(corpora)} (found in {data_dir}); add their --corpus, or point ATTN_DATA_DIR to where "
            "their files are.",
            file=sys.stderr,
        )
        return 2
    try:
        spec = register_model(source, instance, resources["warehouse"])
    except ModelLoadError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(
        f"model {spec.source} -> partition {spec.model_id}; corpora: {', '.join(corpora)}; "
        f"analyses: {', '.join(analysis_names)}"
    )
    materialize(all_assets, selection=[warehouse_views.key], instance=instance, resources=resources)
    materialize(
        all_assets,
        selection=AssetSelection.assets(*keys),
        partition_key=spec.model_id,
        instance=instance,
        resources=resources,
    )
    # From all_assets, so the report records its code version and the refresh schedule finds it current.
    materialize(all_assets, selection=[paper_report.key], instance=instance, resources=resources)
    print(f"warehouse: {resources['warehouse'].database}")
    print(f"charts:    {resources['chart_folder'].for_model(spec.model_id)}")
    print(f"report:    {Path(resources['chart_folder'].path).resolve() / 'report' / 'index.html'}")
    print(f"dagster:   {os.environ['DAGSTER_HOME']} (open the UI with `attn-warehouse ui`)")
    return 0


def add_model(source: str) -> int:
    from dagster import DagsterInstance

    from dagster_project.compute.models import ModelLoadError
    from dagster_project.defs.registration import register_model
    from dagster_project.defs.resources import default_resources

    try:
        spec = register_model(source, DagsterInstance.get(), default_resources()["warehouse"])
    except ModelLoadError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(
        f"registered {spec.source} as partition {spec.model_id}; "
        f"materialize it from the UI or `attn-warehouse run {shlex.quote(source)}`"
    )
    return 0


def _existing_warehouse() -> Path | None:
    """The warehouse file, or None after saying there is none yet."""
    warehouse = settings.warehouse_path()
    if warehouse.exists():
        return warehouse
    print(
        f"error: no warehouse at {warehouse}: run `attn-warehouse run` first (or set ATTN_WAREHOUSE)", file=sys.stderr
    )
    return None


def report(out_dir: Path | None) -> int:
    """Write the static HTML report of every registered model's charts, read from the warehouse."""
    import duckdb

    from dagster_project.presentation.report import read_report_data, write_report

    warehouse = _existing_warehouse()
    if warehouse is None:
        return 2
    try:
        with duckdb.connect(str(warehouse), read_only=True) as conn:
            data = read_report_data(conn)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    pages = write_report(data, out_dir or settings.charts_dir() / "report")
    print(f"report: {pages[0]} ({len(pages) - 1} paper pages, models: {', '.join(data.models['model_id']) or 'none'})")
    return 0


def sql(query: str, max_rows: int) -> int:
    """Run `query` on the warehouse opened read-only, print the result, close: an ad-hoc query
    that does not keep a run from writing once it has printed."""
    import duckdb
    import polars as pl
    import pyarrow as pa

    warehouse = _existing_warehouse()
    if warehouse is None:
        return 2
    try:
        with duckdb.connect(str(warehouse), read_only=True) as conn:
            reader = conn.execute(query).to_arrow_reader(max_rows + 1)
            batches, n_rows = [], 0
            for batch in reader:
                batches.append(batch)
                n_rows += batch.num_rows
                if n_rows > max_rows:
                    break
            result = pl.from_arrow(pa.Table.from_batches(batches, schema=reader.schema))
    except duckdb.IOException as error:
        if "could not set lock" not in str(error).lower():
            raise
        print(
            f"error: the warehouse {warehouse} is being written by another process (a run?): try again when it ends",
            file=sys.stderr,
        )
        return 2
    except duckdb.Error as error:
        print(f"error: {' '.join(str(error).split())}", file=sys.stderr)
        return 2
    assert isinstance(result, pl.DataFrame)
    with pl.Config(tbl_rows=max_rows, tbl_cols=-1, tbl_width_chars=200, fmt_str_lengths=80):
        print(result.head(max_rows))
    if result.height > max_rows:
        print(f"(first {max_rows} rows; --max-rows to see more)")
    return 0


def pools(gpus: int | None) -> int:
    """Set the limits of the pools the assets use (defs/pools.py) on the Dagster instance, before
    the first run: on a Postgres instance two runs meeting a new pool at once race on creating it."""
    from dagster import DagsterInstance

    from dagster_project.defs.pools import pool_limits, set_pool_limits
    from dagster_project.storage.backend import warehouse_backend

    try:
        limits = pool_limits(gpus)
        with DagsterInstance.get() as instance:
            limits = set_pool_limits(instance, limits)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    for pool, limit in limits.items():
        print(f"pool {pool}: limit {limit}")
    print(f"(warehouse backend {warehouse_backend()}; Dagster instance {os.environ['DAGSTER_HOME']})")
    return 0


def ui(port: int) -> int:
    from dagster import DagsterInstance

    from dagster_project.defs.runs import reclaim_dead_runs

    with DagsterInstance.get() as instance:  # runs of a killed `dagster dev` stay STARTED otherwise
        for message in reclaim_dead_runs(instance):
            print(message)
    workspace = settings.PROJECT_ROOT / "workspace.yaml"
    dagster = str(Path(sys.executable).with_name("dagster"))  # the one installed beside this Python
    os.execv(dagster, [dagster, "dev", "-w", str(workspace), "-h", "127.0.0.1", "-p", str(port)])


def main(argv: list[str] | None = None) -> int:
    from dagster_project.compute.models import DEFAULT_MODEL
    from dagster_project.corpora import CORPORA, DEFAULT_CORPORA
    from dagster_project.defs.jobs import ANALYSES, DEFAULT_ANALYSES

    parser = argparse.ArgumentParser(prog="attn-warehouse", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    run_parser = commands.add_parser("run", help="register a model and materialize every asset for it")
    run_parser.add_argument(
        "model", nargs="?", default=DEFAULT_MODEL, help=f"hub id or local path (default {DEFAULT_MODEL})"
    )
    run_parser.add_argument(
        "--corpus",
        action="append",
        choices=[*CORPORA, "all"],
        help=f"corpus to process, repeatable; 'all' for every one (default: {', '.join(DEFAULT_CORPORA)})",
    )
    add_parser = commands.add_parser("add-model", help="register a model as a new partition")
    add_parser.add_argument("model", help="hub id or local path")
    run_parser.add_argument(
        "--analysis",
        action="append",
        choices=list(ANALYSES),
        help="analysis to run, repeatable (default: "
        + ", ".join(DEFAULT_ANALYSES)
        + "); "
        + "; ".join(f"{name}: {analysis.description}" for name, analysis in ANALYSES.items()),
    )
    run_parser.add_argument(
        "--hta", action="store_true", help="add the hta analysis (Pascual's Hidden Token Attribution; slow)"
    )
    ui_parser = commands.add_parser("ui", help="start the Dagster UI on 127.0.0.1")
    ui_parser.add_argument("--port", type=int, default=3000)
    report_parser = commands.add_parser("report", help="write the static HTML report (one page per paper, every model)")
    report_parser.add_argument("--out", type=Path, help="folder for the pages (default: report/ in the charts folder)")
    sql_parser = commands.add_parser(
        "sql", help="run a query on the warehouse opened read-only and print the result (holds no lock afterwards)"
    )
    sql_parser.add_argument("query", help='SQL, e.g. "SELECT * FROM models"')
    sql_parser.add_argument("--max-rows", type=int, default=50, help="rows to print at most (default 50)")
    pools_parser = commands.add_parser(
        "pools", help="set the pools' limits on the Dagster instance (once, before the first run; see README)"
    )
    pools_parser.add_argument(
        "--gpus",
        type=int,
        help="devices the gpu pool shares (non-duckdb backends; default: this machine's CUDA devices, or 1)",
    )
    args = parser.parse_args(argv)
    _use_project_instance()
    try:
        if args.command == "run":
            chosen = args.corpus or list(DEFAULT_CORPORA)
            analyses = list(dict.fromkeys([*(args.analysis or DEFAULT_ANALYSES), *(["hta"] if args.hta else [])]))
            return run(args.model, list(CORPORA) if "all" in chosen else chosen, analyses)
        if args.command == "add-model":
            return add_model(args.model)
        if args.command == "report":
            return report(args.out)
        if args.command == "sql":
            return sql(args.query, max(args.max_rows, 1))
        if args.command == "pools":
            return pools(args.gpus)
    except Exception as error:
        told = _told_error(error)
        if told is None:
            raise
        print(f"error: {told}", file=sys.stderr)
        return 1
    return ui(args.port)


if __name__ == "__main__":
    sys.exit(main())
