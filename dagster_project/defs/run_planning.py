"""Run planning: what one model's run of the chosen analyses materializes on the chosen corpora
whose files are present, what it leaves out as current (staleness.py, with the warehouse's
evidence), and the run config checked against it. The CLI's `run` and `reproduce` plan through
prepare_run; nothing here prints or runs anything."""

import difflib
import shlex
from collections.abc import Callable, Collection
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import duckdb
from dagster import AssetKey, DagsterInstance

from dagster_project.compute.clark.gradients import classifies
from dagster_project.compute.kovaleva.finetuning import FINETUNED_ANALYSES, finetuned_checkpoint_dir
from dagster_project.compute.kovaleva.tasks import FINETUNE_TASKS
from dagster_project.compute.models import inspect_model
from dagster_project.corpora import CORPORA, DEFAULT_CORPORA, PAPER_CORPORA, present_corpora
from dagster_project.corpora.manifest import how_to_get
from dagster_project.defs.assets import all_assets, paper_report, warehouse_views
from dagster_project.defs.assets.kovaleva.finetuning import finetuned_assets_by_task
from dagster_project.defs.jobs import ANALYSES, DEFAULT_ANALYSES, analysis_asset_keys, plan_model_run
from dagster_project.defs.model_registry import checkpoint_entry
from dagster_project.defs.provenance import WarehouseEvidence
from dagster_project.defs.registration import register_model
from dagster_project.defs.resources import default_resources
from dagster_project.defs.run_config import RunConfigError, check_run_config
from dagster_project.defs.schedules import record_corpus_files
from dagster_project.defs.staleness import latest_materialization, up_to_date_keys
from dagster_project.defs.tags import CORPUS
from dagster_project.storage.backend import WarehouseConfig


class RunPlanError(ValueError):
    """The chosen model, corpora, analyses or run config give no run: one line saying what to change."""


def _check_configured_assets(
    run_config: dict, selection: set, source: str, corpora: list[str], analyses: list[str], present: list[str]
) -> list:
    """The asset keys `run_config` configures; each must be one this run materializes."""
    specs = {key: asset.get_asset_spec(key) for asset in all_assets for key in asset.keys}
    keys = []
    for name in run_config.get("ops", {}):
        key = AssetKey(name)
        if key not in specs:
            close = difflib.get_close_matches(name, [k.to_user_string() for k in specs], n=1)
            raise RunPlanError(
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
            raise RunPlanError(
                f"run config for '{name}', which this run does not materialize (analyses {', '.join(analyses)}; "
                f"corpora {', '.join(corpora)}){fix}"
            )
        keys.append(key)
    return keys


def configured_anew(
    instance: DagsterInstance, run_config: dict, keys: list[AssetKey], partition_key: str | None
) -> list[AssetKey]:
    """Those of `keys` (assets `run_config` configures) whose latest materialization of `partition_key`
    did not run with every value `run_config` gives them: a step that already ran with the user's values
    is not forced again, so a resumed `reproduce` with the same --set does not redo its finished steps
    (staleness still re-runs it after a change of code or inputs)."""
    partitioned = {key for asset in all_assets for key in asset.keys if asset.get_asset_spec(key).partitions_def}
    anew = []
    for key in keys:
        wanted = run_config["ops"][key.to_user_string()].get("config", {})
        record = latest_materialization(instance, key, partition_key if key in partitioned else None)
        run = instance.get_run_by_id(record.run_id) if record is not None else None
        ran_with = run.run_config.get("ops", {}).get(key.to_user_string(), {}).get("config", {}) if run else {}
        if run is None or any(field not in ran_with or ran_with[field] != value for field, value in wanted.items()):
            anew.append(key)
    return anew


def _usable_corpora(
    corpus_names: list[str], present: list[str], data_dir: Path, source: str, note: Callable[[str], None]
) -> list[str]:
    """The chosen corpora whose files are in the data directory; `note` gets a line per one skipped."""
    for name in corpus_names:
        if name not in present:
            missing = CORPORA[name].missing_files(data_dir)[0]
            note(f"skipping corpus {name}: {missing} not found; {how_to_get([name])} (or set ATTN_DATA_DIR)")
    corpora = [name for name in corpus_names if name in present]
    if not corpora:
        raise RunPlanError(
            f"no corpus found: none of {', '.join(corpus_names)} has its files in the data directory "
            f"{data_dir}; {how_to_get(corpus_names)}, point ATTN_DATA_DIR to the folder holding the corpora "
            "(laid out like ../shared/data), "
            f"e.g. `ATTN_DATA_DIR=/path/to/data attn-warehouse run {shlex.quote(source)}`, "
            "or add `--corpus demo` for the built-in demo pairs."
        )
    return corpora


def _wanted_keys(analysis_names: list[str], corpora: list[str], present: list[str], data_dir: Path) -> set:
    """The asset keys the chosen analyses have on the chosen corpora; an error when there are none."""
    analyses = [ANALYSES[name] for name in analysis_names]
    wanted = {key for analysis in analyses for key in analysis_asset_keys(analysis, corpora, present)}
    if not wanted:
        usable = {
            analysis.name: [name for name in present if analysis_asset_keys(analysis, [name], present)]
            for analysis in analyses
        }
        raise RunPlanError(
            f"nothing to run: the analyses {', '.join(analysis_names)} need corpora other than "
            f"{', '.join(corpora)} (found in {data_dir}); add their --corpus ("
            + "; ".join(f"{name}: {', '.join(names) or 'none present'}" for name, names in usable.items())
            + "), or point ATTN_DATA_DIR to where their files are."
        )
    return wanted


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

    @property
    def step_names(self) -> list[str]:
        """The names of the assets this run materializes, in its order."""
        return [key.to_user_string() for key in self.keys]

    @property
    def fine_tuned_tasks(self) -> list[str]:
        """The tasks whose checkpoint this run fine-tunes or finds current (finetuned_<task>): each is a
        model of its own, run after this one (checkpoint_runs)."""
        planned = {*self.keys, *self.up_to_date}
        return [task for task in FINETUNE_TASKS if finetuned_assets_by_task[task].key in planned]

    def without_report(self) -> "PreparedRun":
        """This run less the report, for a run that another run of the same command follows."""
        return replace(self, keys=[key for key in self.keys if key != paper_report.key])

    def report_only(self) -> "PreparedRun":
        """The report of this run alone, written after its other steps ran without it (without_report)."""
        return replace(self, keys=[paper_report.key])

    def own_config(self, run_config: dict) -> dict:
        """`run_config` without the values of assets this run leaves out (current: they last ran
        with those values, configured_anew), which Dagster would refuse as unknown ops."""
        names = set(self.step_names)
        ops = {name: op for name, op in run_config.get("ops", {}).items() if name in names}
        rest = {field: value for field, value in run_config.items() if field != "ops"}
        return {**rest, "ops": ops} if ops else rest


def checkpoint_keys(task: str, present: Collection[str]) -> set[AssetKey]:
    """What the first run of a checkpoint fine-tuned on `task` materializes: the analyses its registry entry
    names (FINETUNED_ANALYSES, which the fine-tuning writes into its recipe.json) on the task's corpus; on
    SST-2 the weighting faithfulness among them."""
    return {
        key for name in FINETUNED_ANALYSES for key in analysis_asset_keys(ANALYSES[name], [f"glue_{task}"], present)
    }


def _checkpoints_keys(wanted: set, present: Collection[str]) -> set[AssetKey]:
    """The keys of the checkpoints' runs that the fine-tunings among `wanted` bring."""
    tasks = [task for task in FINETUNE_TASKS if finetuned_assets_by_task[task].key in wanted]
    return {key for task in tasks for key in checkpoint_keys(task, present)}


def checkpoint_runs(
    model_id: str,
    tasks: Collection[str],
    register: bool = True,
    rerun_all: bool = False,
    note: Callable[[str], None] = lambda line: None,
) -> dict[str, "PreparedRun"]:
    """Per task of `tasks` whose checkpoint fine-tuned from `model_id` is saved, its own run, planned from
    its registry entry (recipe.json: FINETUNED_ANALYSES on the task's corpus) as any model's, what is
    current left out; without the report, which the base model's run writes once the checkpoints are in.
    A task not fine-tuned yet has no run (checkpoint_keys says what its first one will be)."""
    runs = {}
    for task in tasks:
        folder = finetuned_checkpoint_dir(model_id, task)
        if not folder.is_dir():
            continue
        entry = checkpoint_entry(folder, ANALYSES, PAPER_CORPORA)
        corpora, analyses = list(entry.corpora or DEFAULT_CORPORA), list(entry.analyses or DEFAULT_ANALYSES)
        prepared = prepare_run(
            entry.source, corpora, analyses, {}, rerun_targets=False, register=register, rerun_all=rerun_all, note=note
        )
        runs[task] = prepared.without_report()
    return runs


def _corpora_of_other_models(warehouse: Any, model_id: str) -> set[str]:
    """The corpora other models have examples of in the warehouse (none before the first run)."""
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
    note: Callable[[str], None] = lambda line: None,
) -> PreparedRun:
    """Plan the run of the chosen analyses (defs.jobs.ANALYSES) for `source` on the chosen corpora
    whose files are in the data directory (jobs.plan_model_run): what is materialized and not stale
    is left out, unless `rerun_targets` (the analyses' own targets are re-run) or `rerun_all`.
    `register`: record the model first (a dry run plans for it unregistered, writing nothing).
    `note` gets a line per chosen corpus skipped for want of its files."""
    resources = default_resources()
    instance = DagsterInstance.get()
    data_dir = resources["data_dir"].root
    present = present_corpora(data_dir)
    corpora = _usable_corpora(corpus_names, present, data_dir, source, note)
    wanted = _wanted_keys(analysis_names, corpora, present, data_dir)
    # run config may also reach the steps of the checkpoints this run fine-tunes (their own runs follow it)
    configured = _check_configured_assets(
        run_config, wanted | _checkpoints_keys(wanted, present), source, corpora, analysis_names, present
    )
    try:  # as the run would check it, before the model is registered
        check_run_config(run_config, configured, source)
    except RunConfigError as error:
        raise RunPlanError(str(error)) from error
    spec = register_model(source, instance, resources["warehouse"]) if register else inspect_model(source)
    required = sorted(wanted) if rerun_all else configured_anew(instance, run_config, configured, spec.model_id)
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
        classifier=classifies(spec.resolved_path),
    )
    views_current = up_to_date_keys(instance, all_assets, [warehouse_views.key], spec.model_id, evidence)
    views = [] if views_current else [warehouse_views.key]
    keys = [*views, *plan.keys, *([] if paper_report.key in plan.keys else [paper_report.key])]
    return PreparedRun(
        spec.source, spec.model_id, corpora, analysis_names, keys, plan.up_to_date, plan.skipped, evidence.note()
    )
