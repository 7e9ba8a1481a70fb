"""`attn-warehouse run [MODEL]`: register a model and run the chosen analyses for it in one Dagster
run (one line per asset here; the full event log in a file), then write the report."""

import argparse
import os
import shlex
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dagster_project import settings
from dagster_project.cli.common import UsageError, one_line, user_error

HELP = "register a model and materialize every asset for it"


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


def _usable_corpora(corpus_names: list[str], present: list[str], data_dir: Path, source: str) -> list[str]:
    """The chosen corpora whose files are in the data directory; says which are skipped."""
    from dagster_project.corpora import CORPORA

    for name in corpus_names:
        if name not in present:
            print(f"skipping corpus {name}: {CORPORA[name].missing_files(data_dir)[0]} not found (set ATTN_DATA_DIR)")
    corpora = [name for name in corpus_names if name in present]
    if not corpora:
        raise UsageError(
            f"no corpus found: none of {', '.join(corpus_names)} has its files in the data directory "
            f"{data_dir}. Point ATTN_DATA_DIR to the folder holding the corpora (laid out like ../shared/data), "
            f"e.g. `ATTN_DATA_DIR=/path/to/data attn-warehouse run {shlex.quote(source)}`, "
            "or add `--corpus demo` for the built-in demo pairs."
        )
    return corpora


def _wanted_keys(analysis_names: list[str], corpora: list[str], present: list[str], data_dir: Path) -> set:
    """The asset keys the chosen analyses have on the chosen corpora; an error when there are none."""
    from dagster_project.defs.jobs import ANALYSES, analysis_asset_keys

    analyses = [ANALYSES[name] for name in analysis_names]
    wanted = {key for analysis in analyses for key in analysis_asset_keys(analysis, corpora, present)}
    if not wanted:
        usable = {
            analysis.name: [name for name in present if analysis_asset_keys(analysis, [name], present)]
            for analysis in analyses
        }
        raise UsageError(
            f"nothing to run: the analyses {', '.join(analysis_names)} need corpora other than "
            f"{', '.join(corpora)} (found in {data_dir}); add their --corpus ("
            + "; ".join(f"{name}: {', '.join(names) or 'none present'}" for name, names in usable.items())
            + "), or point ATTN_DATA_DIR to where their files are."
        )
    return wanted


def _execute(keys: list, resources: dict, instance: Any, model_id: str, run_config: dict, verbose: bool) -> int:
    """Materialize `keys` for the model partition in one in-process run: one line per asset here,
    the full event log in a file; a failure is one line naming the step and the log."""
    import uuid

    from dagster import AssetSelection, Definitions, define_asset_job

    from dagster_project.cli.console import RunConsole, file_logger, library_logs_to
    from dagster_project.defs.assets import all_assets

    log_path = _log_path()
    print(f"log: {log_path}" + ("" if verbose else " (--verbose to stream it here)"))
    if not verbose:
        library_logs_to(log_path)
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
            partition_key=model_id,
            run_id=run_id,
        )
    except Exception as error:
        console.stop()
        step, cause = user_error(error)
        step = step or next((failed for failed, _ in console.failures), None)
        with log_path.open("a", encoding="utf-8") as log:
            log.write("".join(traceback.format_exception(error)))
        print(f"error: {step + ': ' if step else ''}{one_line(cause)}", file=sys.stderr)
        print(f"(the traceback is in {log_path})", file=sys.stderr)
        return 1
    console.stop()
    return 0


@dataclass
class PreparedRun:
    """One model's run, planned: what it materializes and what it leaves out as current."""

    source: str
    model_id: str
    corpora: list[str]
    analyses: list[str]
    keys: list  # AssetKeys to materialize, the views first and the report last
    up_to_date: list  # AssetKeys left out: materialized and not stale
    skipped: list[str]  # one line per kind of step left out because it cannot produce rows
    unheld: str | None = None  # what the run history calls current but the warehouse lacks, re-run


def _corpora_of_other_models(warehouse: Any, model_id: str) -> set[str]:
    """The corpora other models have examples of in the warehouse (none before the first run)."""
    import duckdb

    from dagster_project.storage.backend import WarehouseConfig

    if not WarehouseConfig.from_env().exists():
        return set()
    with warehouse.get_connection() as conn:
        try:
            rows = conn.execute("SELECT DISTINCT corpus FROM stg_examples WHERE model_id <> ?", [model_id]).fetchall()
        except duckdb.CatalogException:  # no views yet
            return set()
    return {corpus for (corpus,) in rows}


def prepare_run(
    source: str,
    corpus_names: list[str],
    analysis_names: list[str],
    run_config: dict,
    rerun_targets: bool = True,
    register: bool = True,
    rerun_all: bool = False,
) -> PreparedRun:
    """Plan the run of the chosen analyses (defs.jobs.ANALYSES) for `source` on the chosen corpora
    whose files are in the data directory (jobs.plan_model_run): what is materialized and not stale
    is left out, unless `rerun_targets` (the analyses' own targets are re-run) or `rerun_all`.
    `register`: record the model first (a dry run plans for it unregistered, writing nothing)."""
    from dagster import DagsterInstance

    from dagster_project.compute.models import inspect_model
    from dagster_project.corpora import present_corpora
    from dagster_project.defs.assets import all_assets, paper_report, warehouse_views
    from dagster_project.defs.jobs import ANALYSES, plan_model_run
    from dagster_project.defs.provenance import WarehouseEvidence
    from dagster_project.defs.registration import register_model
    from dagster_project.defs.resources import default_resources
    from dagster_project.defs.schedules import record_corpus_files, up_to_date_keys

    resources = default_resources()
    instance = DagsterInstance.get()
    data_dir = resources["data_dir"].root
    present = present_corpora(data_dir)
    corpora = _usable_corpora(corpus_names, present, data_dir, source)
    wanted = _wanted_keys(analysis_names, corpora, present, data_dir)
    required = _check_configured_assets(run_config, wanted, source, corpora, analysis_names, present)
    if rerun_all:
        required = sorted(wanted)
    spec = register_model(source, instance, resources["warehouse"]) if register else inspect_model(source)
    if register:
        record_corpus_files(instance, resources["data_dir"])  # changed corpus files make their examples stale
    analyses = [ANALYSES[name] for name in analysis_names]
    evidence = WarehouseEvidence.read(resources["warehouse"])
    plan = plan_model_run(
        instance,
        analyses,
        corpora,
        present,
        spec.model_id,
        rerun_targets=rerun_targets,
        required=required,
        others_corpora=_corpora_of_other_models(resources["warehouse"], spec.model_id),
        evidence=evidence,
    )
    views_current = up_to_date_keys(instance, all_assets, [warehouse_views.key], spec.model_id, evidence)
    views = [] if views_current else [warehouse_views.key]
    keys = [*views, *plan.keys, *([] if paper_report.key in plan.keys else [paper_report.key])]
    return PreparedRun(
        spec.source, spec.model_id, corpora, analysis_names, keys, plan.up_to_date, plan.skipped, evidence.note()
    )


def execute_run(prepared: PreparedRun, run_config: dict, verbose: bool) -> int:
    """Materialize a prepared run in this process (one line per asset; the event log in a file)."""
    import transformers
    from dagster import DagsterInstance

    from dagster_project.cli.recovery import announce_pool_waits, reclaim_dead_runs, stop_on_interrupt
    from dagster_project.defs.resources import default_resources

    if not verbose:  # one line per asset, not transformers' bar per model load
        transformers.utils.logging.disable_progress_bar()
    instance = DagsterInstance.get()
    stop_on_interrupt(instance)
    announce_pool_waits(instance)
    for message in reclaim_dead_runs(instance):  # a killed run's pool slot would block this one forever
        print(message)
    return _execute(prepared.keys, default_resources(), instance, prepared.model_id, run_config, verbose)


def print_outputs(model_id: str) -> None:
    """Where the warehouse (a lake's catalog with its password masked), the charts, the report and
    the Dagster instance are."""
    from dagster_project.defs.resources import default_resources
    from dagster_project.storage.backend import WarehouseConfig

    resources = default_resources()
    print(f"warehouse: {WarehouseConfig.from_env().describe()}")
    print(f"charts:    {resources['chart_folder'].for_model(model_id)}")
    print(f"report:    {Path(resources['chart_folder'].path).resolve() / 'report' / 'index.html'}")
    print(f"dagster:   {os.environ['DAGSTER_HOME']} (open the UI with `attn-warehouse ui`)")


def run(
    source: str,
    corpus_names: list[str],
    analysis_names: list[str],
    run_config: dict | None = None,
    verbose: bool = False,
) -> int:
    """Register `source` and run the chosen analyses for it on the chosen corpora, with the static
    report, in one run that leaves out what is materialized and not stale (the analyses' own targets
    are re-run). Prints one line per asset; the full event log goes to a file."""
    run_config = run_config or {}
    prepared = prepare_run(source, corpus_names, analysis_names, run_config)
    print(
        f"model {prepared.source} -> partition {prepared.model_id}; corpora: {', '.join(prepared.corpora)}; "
        f"analyses: {', '.join(analysis_names)}"
    )
    if prepared.up_to_date:
        print(f"up to date, not re-run: {', '.join(key.to_user_string() for key in prepared.up_to_date)}")
    for line in [*prepared.skipped, *([prepared.unheld] if prepared.unheld else [])]:
        print(line)
    if execute_run(prepared, run_config, verbose):
        return 1
    print_outputs(prepared.model_id)
    return 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from dagster_project.compute.models import DEFAULT_MODEL
    from dagster_project.corpora import CORPORA, DEFAULT_CORPORA
    from dagster_project.defs.jobs import ANALYSES, DEFAULT_ANALYSES

    parser.add_argument(
        "model", nargs="?", default=DEFAULT_MODEL, help=f"hub id or local path (default {DEFAULT_MODEL})"
    )
    parser.add_argument(
        "--corpus",
        action="append",
        choices=[*CORPORA, "all"],
        help=f"corpus to process, repeatable; 'all' for every one the papers use (CoLA and WNLI only when named; "
        f"default: {', '.join(DEFAULT_CORPORA)})",
    )
    parser.add_argument(
        "--analysis",
        action="append",
        choices=list(ANALYSES),
        help="analysis to run, repeatable (default: "
        + ", ".join(DEFAULT_ANALYSES)
        + "); "
        + "; ".join(f"{name}: {analysis.description}" for name, analysis in ANALYSES.items()),
    )
    parser.add_argument(
        "--hta", action="store_true", help="add the hta analysis (Pascual's Hidden Token Attribution; slow)"
    )
    parser.add_argument(
        "--config",
        type=Path,
        metavar="FILE.yaml",
        help="run config in the launchpad's format: ops: {ASSET: {config: {FIELD: VALUE}}}",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="ASSET.FIELD=VALUE",
        help="one run config value, repeatable (after --config): xnli_en_hta_facts.max_examples=50, "
        "finetuned_mrpc.max_steps=40, finetuned_mrpc.train_subset=500",
    )
    parser.add_argument(
        "--verbose", action="store_true", help="stream Dagster's full event log (always written to the log file)"
    )


def command(args: argparse.Namespace) -> int:
    from dagster_project.defs.jobs import DEFAULT_ANALYSES

    analyses = list(dict.fromkeys([*(args.analysis or DEFAULT_ANALYSES), *(["hta"] if args.hta else [])]))
    run_config = run_config_from(args.config, args.set)
    return run(args.model, chosen_corpora(args.corpus), analyses, run_config, args.verbose)


def chosen_corpora(names: list[str] | None) -> list[str]:
    """The corpora of `--corpus` values: the default ones when none is given; `all` stands for
    every corpus the papers use (CoLA and WNLI only when named as well)."""
    from dagster_project.corpora import DEFAULT_CORPORA, PAPER_CORPORA

    if not names:
        return list(DEFAULT_CORPORA)
    if "all" in names:
        return list(dict.fromkeys([*PAPER_CORPORA, *(name for name in names if name != "all")]))
    return names
