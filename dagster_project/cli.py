"""`attn-warehouse`: run the analyses for a model (one line per asset; the full log in a file),
register models, query or export the warehouse, write the report, open the UI.

Sets DAGSTER_HOME to the project's .dagster folder unless it is set, so partitions and
run history persist between commands and the UI.
"""

import argparse
import os
import shlex
import sys
import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING

from dagster_project import settings

if TYPE_CHECKING:
    from dagster_project.storage.backend import WarehouseConfig


def _use_project_instance() -> None:
    home = settings.dagster_home()
    home.mkdir(parents=True, exist_ok=True)
    os.environ["DAGSTER_HOME"] = str(home)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


class UsageError(ValueError):
    """A command line that cannot run as given; printed as one line, exit status 2."""


def _user_error(error: BaseException) -> tuple[str | None, BaseException]:
    """The step and the exception an asset raised behind `error` (Dagster wraps it), else (None, error)."""
    seen: set[int] = set()
    current: BaseException | None = error
    step = None
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        step = getattr(current, "step_key", None) or step
        inner = getattr(current, "user_exception", None)
        if inner is None:
            return step, current
        current = inner
    return step, error


def _one_line(error: BaseException) -> str:
    errors = getattr(error, "errors", None)  # DagsterInvalidConfigError: one entry per problem
    text = "; ".join(str(getattr(item, "message", item)) for item in errors) if errors else str(error)
    return " ".join(text.split()) or type(error).__name__


def run_config_from(config_file: Path | None, assignments: list[str]) -> dict:
    """Run config in the launchpad's format (`ops: {ASSET: {config: {FIELD: VALUE}}}`) from a
    YAML file, then `ASSET.FIELD=VALUE` assignments (values read as YAML: 50, true, [a, b])."""
    import yaml

    config: dict = {}
    if config_file is not None:
        try:
            loaded = yaml.safe_load(config_file.read_text(encoding="utf-8"))
        except OSError as error:
            raise UsageError(f"--config {config_file}: {error.strerror}") from error
        except yaml.YAMLError as error:
            mark = getattr(error, "problem_mark", None)
            where = f"{config_file}, line {mark.line + 1}" if mark else str(config_file)
            raise UsageError(f"{where}: not valid YAML ({getattr(error, 'problem', error)})") from error
        if loaded is not None and not (isinstance(loaded, dict) and isinstance(loaded.get("ops", {}), dict)):
            raise UsageError(
                f"{config_file}: expected the launchpad's run config, a mapping like "
                "`ops: {xnli_en_hta_facts: {config: {max_examples: 50}}}`"
            )
        config = loaded or {}
    for assignment in assignments:
        target, equals, value = assignment.partition("=")
        asset_name, dot, field = target.partition(".")
        if not (equals and dot and asset_name and field):
            raise UsageError(
                f"--set {assignment!r}: expected ASSET.FIELD=VALUE, e.g. --set xnli_en_hta_facts.max_examples=50"
            )
        try:
            parsed = yaml.safe_load(value)
        except yaml.YAMLError as error:
            raise UsageError(f"--set {assignment!r}: the value is not valid YAML") from error
        config.setdefault("ops", {}).setdefault(asset_name, {}).setdefault("config", {})[field] = parsed
    return config


def _check_configured_assets(
    run_config: dict, selection: set, source: str, corpora: list[str], analyses: list[str], present: list[str]
) -> list:
    """The asset keys `run_config` configures; each must be one this run materializes."""
    import difflib

    from dagster import AssetKey

    from dagster_project.defs.assets import all_assets
    from dagster_project.defs.jobs import ANALYSES, analysis_asset_keys
    from dagster_project.defs.tags import CORPUS

    specs = {key: asset.get_asset_spec(key) for asset in all_assets for key in asset.keys}
    keys = []
    for name in run_config.get("ops", {}):
        key = AssetKey(name)
        if key not in specs:
            close = difflib.get_close_matches(name, [k.to_user_string() for k in specs], n=1)
            raise UsageError(
                f"run config for '{name}': no such asset" + (f" (did you mean {close[0]}?)" if close else "")
            )
        if key not in selection:
            corpus = specs[key].tags.get(CORPUS)
            wider = [*corpora, *([corpus] if corpus and corpus not in corpora else [])]
            runs = [analysis for analysis in ANALYSES if key in analysis_asset_keys(ANALYSES[analysis], wider, present)]
            command = ["attn-warehouse", "run", source, *(f"--corpus={chosen}" for chosen in wider)]
            command += [f"--analysis={analysis}" for analysis in dict.fromkeys([*analyses, *runs[:1]])]
            if runs:
                fix = f": run `{shlex.join(command)}`"
            elif corpus and corpus not in present:
                fix = f": its corpus {corpus} has no files in the data directory"
            else:
                fix = ": no analysis materializes it for these corpora"
            raise UsageError(
                f"run config for '{name}', which this run does not materialize (analyses {', '.join(analyses)}; "
                f"corpora {', '.join(corpora)}){fix}"
            )
        keys.append(key)
    return keys


def _log_path() -> Path:
    folder = settings.dagster_home() / "run_logs"  # not logs/: Dagster keeps its telemetry there
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"run-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"


def run(
    source: str,
    corpus_names: list[str],
    analysis_names: list[str],
    run_config: dict | None = None,
    verbose: bool = False,
) -> int:
    """Register `source` and run the chosen analyses (defs.jobs.ANALYSES) for it on the chosen
    corpora whose files are in the data directory, with the static report, in one run that
    leaves out what is materialized and not stale (jobs.plan_model_run; the analyses' own
    targets are re-run). Prints one line per asset; the full event log goes to a file."""
    import uuid

    import transformers
    from dagster import AssetSelection, DagsterInstance, Definitions, define_asset_job

    from dagster_project.corpora import CORPORA, present_corpora
    from dagster_project.defs.assets import all_assets, paper_report, warehouse_views
    from dagster_project.defs.console import RunConsole, file_logger
    from dagster_project.defs.jobs import ANALYSES, analysis_asset_keys, plan_model_run
    from dagster_project.defs.registration import register_model
    from dagster_project.defs.resources import default_resources
    from dagster_project.defs.runs import announce_pool_waits, reclaim_dead_runs, stop_on_interrupt
    from dagster_project.defs.schedules import record_corpus_files, up_to_date_keys

    run_config = run_config or {}
    if not verbose:  # one line per asset, not transformers' bar per model load
        transformers.utils.logging.disable_progress_bar()
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
    analyses = [ANALYSES[name] for name in analysis_names]
    wanted = {key for analysis in analyses for key in analysis_asset_keys(analysis, corpora, present)}
    if not wanted:
        usable = {
            analysis.name: [name for name in present if analysis_asset_keys(analysis, [name], present)]
            for analysis in analyses
        }
        print(
            f"error: nothing to run: the analyses {', '.join(analysis_names)} need corpora other than "
            f"{', '.join(corpora)} (found in {data_dir}); add their --corpus ("
            + "; ".join(f"{name}: {', '.join(names) or 'none present'}" for name, names in usable.items())
            + "), or point ATTN_DATA_DIR to where their files are.",
            file=sys.stderr,
        )
        return 2
    required = _check_configured_assets(run_config, wanted, source, corpora, analysis_names, present)
    spec = register_model(source, instance, resources["warehouse"])
    print(
        f"model {spec.source} -> partition {spec.model_id}; corpora: {', '.join(corpora)}; "
        f"analyses: {', '.join(analysis_names)}"
    )
    record_corpus_files(instance, resources["data_dir"])  # changed corpus files make their examples stale
    plan = plan_model_run(instance, analyses, corpora, present, spec.model_id, rerun_targets=True, required=required)
    views = [] if up_to_date_keys(instance, all_assets, [warehouse_views.key], spec.model_id) else [warehouse_views.key]
    keys = [*views, *plan.keys, *([] if paper_report.key in plan.keys else [paper_report.key])]
    if plan.up_to_date:
        print(f"up to date, not re-run: {', '.join(key.to_user_string() for key in plan.up_to_date)}")
    log_path = _log_path()
    print(f"log: {log_path}" + ("" if verbose else " (--verbose to stream it here)"))
    job = define_asset_job("attn_warehouse_run", selection=AssetSelection.assets(*keys))
    definitions = Definitions(
        assets=all_assets, jobs=[job], resources=resources, loggers={"run_log": file_logger(log_path, verbose)}
    )
    console = RunConsole(instance, total_steps=len(keys))
    run_id = str(uuid.uuid4())
    console.start(run_id)
    try:
        definitions.resolve_job_def(job.name).execute_in_process(
            # Only the log file's logger: Dagster's console logger would print every event.
            run_config={**run_config, "loggers": {"run_log": {}}},
            instance=instance,
            partition_key=spec.model_id,
            run_id=run_id,
        )
    except Exception as error:
        console.stop()
        step, cause = _user_error(error)
        step = step or next((failed for failed, _ in console.failures), None)
        with log_path.open("a", encoding="utf-8") as log:
            log.write("".join(traceback.format_exception(error)))
        print(f"error: {step + ': ' if step else ''}{_one_line(cause)}", file=sys.stderr)
        print(f"(the traceback is in {log_path})", file=sys.stderr)
        return 1
    console.stop()
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


def _existing_warehouse() -> "WarehouseConfig | None":
    """The configured warehouse (storage/backend.py), or None after saying there is none yet."""
    from dagster_project.storage.backend import WarehouseConfig
    from dagster_project.storage.lake import LakeConfigError

    try:
        warehouse = WarehouseConfig.from_env()
    except LakeConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return None
    if warehouse.exists():
        return warehouse
    print(
        f"error: no warehouse at {warehouse.database}: run `attn-warehouse run` first (or set ATTN_WAREHOUSE)",
        file=sys.stderr,
    )
    return None


def report(out_dir: Path | None) -> int:
    """Write the static HTML report of every registered model's charts, read from the warehouse."""

    from dagster_project.presentation.report import read_report_data, write_report
    from dagster_project.storage.lake import LakeConfigError

    warehouse = _existing_warehouse()
    if warehouse is None:
        return 2
    try:
        with warehouse.connect_read_only() as conn:
            data = read_report_data(conn)
    except (ValueError, LakeConfigError) as error:
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

    from dagster_project.storage.lake import LakeConfigError

    warehouse = _existing_warehouse()
    if warehouse is None:
        return 2
    try:
        with warehouse.connect_read_only() as conn:
            reader = conn.execute(query).to_arrow_reader(max_rows + 1)
            batches, n_rows = [], 0
            for batch in reader:
                batches.append(batch)
                n_rows += batch.num_rows
                if n_rows > max_rows:
                    break
            result = pl.from_arrow(pa.Table.from_batches(batches, schema=reader.schema))
    except (duckdb.Error, LakeConfigError) as error:
        return _reader_error(error, warehouse)
    assert isinstance(result, pl.DataFrame)
    with pl.Config(tbl_rows=max_rows, tbl_cols=-1, tbl_width_chars=200, fmt_str_lengths=80):
        print(result.head(max_rows))
    if result.height > max_rows:
        print(f"(first {max_rows} rows; --max-rows to see more)")
    return 0


def _reader_error(error: Exception, warehouse: "WarehouseConfig") -> int:
    """Say in one line why a read-only visit to the warehouse failed; exit status 2."""
    if "could not set lock" in str(error).lower():
        print(
            f"error: the warehouse {warehouse.database} is being written by another process (a run?): "
            "try again when it ends",
            file=sys.stderr,
        )
    else:
        print(f"error: {' '.join(str(error).split())}", file=sys.stderr)
    return 2


def export(view: str, file_format: str, out: Path | None, model_id: str | None) -> int:
    """Write a view (or table) of the warehouse, opened read-only, to a Parquet or CSV file."""
    import difflib

    import duckdb

    from dagster_project.storage.lake import LakeConfigError

    warehouse = _existing_warehouse()
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
            if file_format == "parquet":
                relation.write_parquet(str(out))
            else:
                relation.write_csv(str(out))
    except (duckdb.Error, LakeConfigError) as error:
        return _reader_error(error, warehouse)
    print(f"{out}: {rows} rows of {view}" + (f" for model {model_id}" if model_id else ""))
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
    run_parser.add_argument(
        "--config",
        type=Path,
        metavar="FILE.yaml",
        help="run config in the launchpad's format: ops: {ASSET: {config: {FIELD: VALUE}}}",
    )
    run_parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="ASSET.FIELD=VALUE",
        help="one run config value, repeatable (after --config): xnli_en_hta_facts.max_examples=50, "
        "finetuned_mrpc.max_steps=40, finetuned_mrpc.train_subset=500",
    )
    run_parser.add_argument(
        "--verbose", action="store_true", help="stream Dagster's full event log (always written to the log file)"
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
    export_parser = commands.add_parser("export", help="write a view or table of the warehouse to a file")
    export_parser.add_argument("view", help="e.g. clark_coreference_heads")
    export_parser.add_argument("--format", choices=["parquet", "csv"], default="parquet")
    export_parser.add_argument("--out", type=Path, help="the file to write (default: VIEW.FORMAT here)")
    export_parser.add_argument("--model", help="only this model_id's rows")
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
            run_config = run_config_from(args.config, args.set)
            return run(args.model, list(CORPORA) if "all" in chosen else chosen, analyses, run_config, args.verbose)
        if args.command == "add-model":
            return add_model(args.model)
        if args.command == "report":
            return report(args.out)
        if args.command == "sql":
            return sql(args.query, max(args.max_rows, 1))
        if args.command == "export":
            return export(args.view, args.format, args.out, args.model)
        if args.command == "pools":
            return pools(args.gpus)
    except UsageError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except Exception as error:
        from dagster_project.compute.models import ModelLoadError
        from dagster_project.corpora import CorpusError
        from dagster_project.storage.warehouse import WarehouseFullError, WarehouseLockedError

        _, cause = _user_error(error)
        if not isinstance(cause, (ModelLoadError, CorpusError, WarehouseLockedError, WarehouseFullError)):
            raise
        print(f"error: {_one_line(cause)}", file=sys.stderr)
        return 2 if isinstance(cause, ModelLoadError) else 1
    return ui(args.port)


if __name__ == "__main__":
    sys.exit(main())
