"""What `run` and `reproduce` share: run config from --config and --set, the corpora of --corpus,
a planned run (defs/run_planning.py) materialized in this process with one line per asset, and
where its outputs are."""

import os
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from dagster_project import settings
from dagster_project.cli.common import RunInterrupted, UsageError, one_line, user_error

if TYPE_CHECKING:
    from dagster import DagsterInstance

    from dagster_project.cli.console import RunConsole
    from dagster_project.defs.run_planning import PreparedRun


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


def chosen_corpora(names: list[str] | None) -> list[str]:
    """The corpora of `--corpus` values: the default ones when none is given; `all` stands for
    every corpus the papers use (CoLA and WNLI only when named as well)."""
    from dagster_project.corpora import DEFAULT_CORPORA, PAPER_CORPORA

    if not names:
        return list(DEFAULT_CORPORA)
    if "all" in names:
        return list(dict.fromkeys([*PAPER_CORPORA, *(name for name in names if name != "all")]))
    return names


def _log_path() -> Path:
    folder = settings.dagster_home() / "run_logs"  # not logs/: Dagster keeps its telemetry there
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"run-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"


def _any_partitioned(keys: list, assets: list) -> bool:
    """Whether any of the asset `keys` is partitioned (by model)."""
    return any(asset.get_asset_spec(key).partitions_def for asset in assets for key in asset.keys if key in keys)


def _execute(keys: list, resources: dict, instance: Any, model_id: str, run_config: dict, verbose: bool) -> int:
    """Materialize `keys` for the model partition in one in-process run: one line per asset here,
    the full event log in a file; a failure is one line naming the step and the log."""
    import uuid

    from dagster import AssetSelection, DagsterExecutionInterruptedError, Definitions, define_asset_job

    from dagster_project.cli.console import RunConsole, file_logger, logs_in_file
    from dagster_project.defs.assets import all_assets

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
        with logs_in_file(log_path, verbose):
            definitions.resolve_job_def(job.name).execute_in_process(
                # Only the log file's logger: Dagster's console logger would print every event.
                run_config={**run_config, "loggers": {"run_log": {}}},
                instance=instance,
                # a run of unpartitioned assets alone (the report, after the checkpoints' runs) takes none
                partition_key=model_id if _any_partitioned(keys, all_assets) else None,
                run_id=run_id,
            )
    except (KeyboardInterrupt, DagsterExecutionInterruptedError) as error:  # Ctrl-C or SIGTERM (stop_on_interrupt)
        _interrupted(instance, console, run_id, log_path, error)
    except Exception as error:
        import duckdb

        step, cause = user_error(error)
        if isinstance(cause, duckdb.InterruptException):  # the signal came while DuckDB ran the step's query
            _interrupted(instance, console, run_id, log_path, error)
        console.stop()
        step = step or next((failed for failed, _ in console.failures), None)
        with log_path.open("a", encoding="utf-8") as log:
            log.write("".join(traceback.format_exception(error)))
        print(failure_line(step, cause), file=sys.stderr)
        print(f"(the traceback is in {log_path})", file=sys.stderr)
        return 1
    console.stop()
    return 0


def _interrupted(
    instance: "DagsterInstance", console: "RunConsole", run_id: str, log_path: Path, error: BaseException
) -> NoReturn:
    """Say how an interrupted run ended (its traceback to the log) and raise RunInterrupted."""
    from dagster_project.cli.recovery import cancel_run

    console.stop()
    with log_path.open("a", encoding="utf-8") as log:
        log.write("".join(traceback.format_exception(error)))
    status = cancel_run(instance, run_id)
    step = next((failed for failed, _ in console.failures), None)
    if status is None:
        print(f"interrupted: stopped before run {run_id} began; nothing was written", file=sys.stderr)
    else:
        print(
            f"interrupted: run {run_id} stopped{' in ' + step if step else ''} ({status.value.lower()}); an "
            f"unfinished write was rolled back: re-run to finish what it left (the log: {log_path})",
            file=sys.stderr,
        )
    raise RunInterrupted from None


def failure_line(step: str | None, cause: BaseException) -> str:
    """`error: STEP: MESSAGE`, the step named once where the message begins with it already."""
    message = one_line(cause)
    return f"error: {step + ': ' if step and not message.startswith(f'{step}:') else ''}{message}"


def plan_run(
    source: str, corpus_names: list[str], analysis_names: list[str], run_config: dict, **options: bool
) -> "PreparedRun":
    """defs.run_planning.prepare_run with its skipped corpora printed and a plan error as a usage
    error (one line, exit status 2); `options` are prepare_run's flags."""
    from dagster_project.defs.run_planning import RunPlanError, prepare_run

    try:
        return prepare_run(source, corpus_names, analysis_names, run_config, note=print, **options)
    except RunPlanError as error:
        raise UsageError(str(error)) from error


def execute_run(prepared: "PreparedRun", run_config: dict, verbose: bool) -> int:
    """Materialize a prepared run in this process (one line per asset; the event log in a file)."""
    import transformers
    from dagster import DagsterInstance

    from dagster_project.cli.recovery import announce_pool_waits, reclaim_dead_runs, stop_on_interrupt
    from dagster_project.defs.resources import default_resources

    if not verbose:  # one line per asset, not transformers' bar per model load
        transformers.utils.logging.disable_progress_bar()
    with DagsterInstance.get() as instance, stop_on_interrupt(instance), announce_pool_waits(instance):
        for message in reclaim_dead_runs(instance):  # a killed run's pool slot would block this one forever
            print(message)
        config = prepared.own_config(run_config)
        return _execute(prepared.keys, default_resources(), instance, prepared.model_id, config, verbose)


def run_checkpoints(
    model_id: str,
    tasks: list[str],
    config_for: Callable[[list[str]], dict],
    verbose: bool,
    rerun_all: bool = False,
) -> int:
    """The own run of each checkpoint fine-tuned from `model_id` on `tasks` that is saved (on its task's
    corpus: the attention facts, and on SST-2 the weighting faithfulness; run_planning.checkpoint_runs),
    one after the other, each with the run config `config_for` gives its steps; nonzero where one failed."""
    from dagster_project.defs.run_planning import checkpoint_runs

    for prepared in checkpoint_runs(model_id, tasks, rerun_all=rerun_all, note=print).values():
        corpora = ", ".join(prepared.corpora)
        print(f"\nattention of {Path(prepared.source).name}, fine-tuned from {model_id}, on {corpora}")
        for line in prepared.skipped:
            print(line)
        if not prepared.keys:
            print("up to date, nothing to run")
        elif execute_run(prepared, config_for(prepared.step_names), verbose):
            return 1
    return 0


def checkpoint_plan_lines(checkpoints: list[tuple[str, list[str]]]) -> list[str]:
    """For a dry run: what the own run of each checkpoint (checkpoint_step_names) would run, a line each."""
    return [f"{whose} in a run of its own: {len(names)} steps: {', '.join(names)}" for whose, names in checkpoints]


def checkpoint_step_names(prepared: "PreparedRun") -> list[tuple[str, list[str]]]:
    """Per checkpoint the planned run fine-tunes, whose it is and the steps its own run would run (a saved
    checkpoint planned as its run will be; one not fine-tuned yet, its first run whole)."""
    from dagster_project.corpora import present_corpora
    from dagster_project.defs.resources import default_resources
    from dagster_project.defs.run_planning import checkpoint_keys, checkpoint_runs

    tasks = prepared.fine_tuned_tasks
    saved = checkpoint_runs(prepared.model_id, tasks, register=False)
    present = present_corpora(default_resources()["data_dir"].root)
    plans = []
    for task in tasks:
        if task in saved:
            whose, names = f"then its {task} checkpoint ({saved[task].model_id})", saved[task].step_names
        else:
            whose = f"then, once fine-tuned, its {task} checkpoint"
            names = sorted(key.to_user_string() for key in checkpoint_keys(task, present))
        plans.append((whose, names))
    return plans


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
