"""The models-registry sensor: registers what models.toml and the drop folders list and
requests one run per model for its analyses not requested yet.

The cursor keeps f"{model_id}:{analysis}" for every analysis requested, so repeated ticks
launch nothing twice. The run leaves out what is already materialized at the current code
version (jobs.plan_model_run): after `attn-warehouse run` the sensor launches nothing for that
model, and the analyses of one model share one run, so none recomputes another's facts. A
bad entry (malformed, unloadable, not an encoder) is reported in the tick's log and skip
reason and never blocks the others.

An unknown hub id costs 25-30 s of hub retries without network, and a tick that runs past
Dagster's sensor timeout (60 s) loses every entry's runs. So a hub id that failed to load is
retried only after RETRY_UNLOADABLE_HUB_ID_SECONDS (the cursor keeps its reason to report
meanwhile), local checkpoints are checked first, and once INSPECTION_BUDGET_SECONDS of loading
are spent the remaining entries wait for the next tick.
"""

import json
import time
from collections.abc import Sequence
from contextlib import closing
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from dagster import (
    AssetKey,
    DagsterInstance,
    DefaultSensorStatus,
    RunRequest,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    sensor,
)
from dagster_duckdb import DuckDBResource

from dagster_project.compute.models import ModelLoadError, inspect_model, is_local_checkpoint, model_key
from dagster_project.corpora import CORPORA, DEFAULT_CORPORA, present_corpora
from dagster_project.defs.assets import warehouse_views
from dagster_project.defs.jobs import (
    ANALYSES,
    DEFAULT_ANALYSES,
    analysis_asset_keys,
    model_analysis_job,
    plan_model_run,
    views_job,
)
from dagster_project.defs.model_registry import (
    RegistryEntry,
    RegistryError,
    RegistryProblem,
    drop_folders,
    registry_path,
    scan_registry,
)
from dagster_project.defs.partitions import model_partitions
from dagster_project.defs.resources import DataDirectory, connect_warehouse
from dagster_project.storage.connections import WarehouseLockedError
from dagster_project.storage.model_rows import upsert_model
from dagster_project.storage.sql_files import sql_code_version

MINIMUM_INTERVAL_SECONDS = 60
RETRY_UNLOADABLE_HUB_ID_SECONDS = 15 * 60
INSPECTION_BUDGET_SECONDS = 20
LOCK_WAIT_SECONDS = 10  # per entry, for the warehouse lock held by a run or a reader


def run_key(model_id: str, analysis: str) -> str:
    return f"{model_id}:{analysis}"


def language_key(entry: RegistryEntry) -> str:
    """The cursor's mark that the entry's `language` is stored in the warehouse, so that giving a
    registered model a language (or another one) registers it again."""
    return f"{model_key(entry.source)}:language={entry.language}"


def _entry_runs(
    instance: DagsterInstance, entry: RegistryEntry, model_id: str, present: list[str], launched: set[str]
) -> tuple[list[RunRequest], list[str], set[str]]:
    """The run request for the entry's analyses not requested yet (at most one), why any was
    left out, and the run keys of the analyses it settles (requested, or already done)."""
    chosen = entry.corpora or DEFAULT_CORPORA
    corpora = [name for name in chosen if name in present]
    names, notes = [], []
    for name in entry.analyses or DEFAULT_ANALYSES:
        if run_key(model_id, name) in launched:
            continue
        selection = analysis_asset_keys(ANALYSES[name], corpora, present)
        if not selection or selection == [AssetKey("encoder_model")]:
            notes.append(
                f"analysis '{name}' has nothing to run on the corpora with files in the data directory "
                f"({', '.join(corpora) or 'none'})"
            )
            continue
        names.append(name)
    if not names:
        return [], notes, set()
    settled = {run_key(model_id, name) for name in names}
    plan = plan_model_run(instance, [ANALYSES[name] for name in names], corpora, present, model_id)
    if not plan.keys:
        notes.append(f"{', '.join(names)}: already materialized at the current code version; nothing to run")
        return [], notes, settled
    request = RunRequest(
        run_key="+".join(sorted(settled)),
        job_name=model_analysis_job.name,
        partition_key=model_id,
        asset_selection=plan.keys,
        tags={"model": model_id, "analysis": ",".join(names)},
    )
    return [request], notes, settled


def _cursor_marks(entry: RegistryEntry) -> set[str]:
    """The cursor keys an entry is done with: one run key per analysis, and its language's mark."""
    model_id = model_key(entry.source)
    marks = {run_key(model_id, name) for name in entry.analyses or DEFAULT_ANALYSES}
    return marks | {language_key(entry)} if entry.language else marks


def _pending(entries: Sequence[RegistryEntry], launched: set[str]) -> list[RegistryEntry]:
    """The enabled entries with an analysis not requested yet or a `language` not stored yet,
    local checkpoints first (they load fast; a hub id may spend the tick's loading budget on retries)."""
    pending = [entry for entry in entries if entry.enabled and not _cursor_marks(entry) <= launched]
    pending.sort(key=lambda entry: not is_local_checkpoint(entry.source))  # stable: local first, hub ids after
    return pending


@dataclass
class _Tick:
    """What one tick found: problems to report, hub ids to retry later, and what to request."""

    problems: list[RegistryProblem]
    failed: dict[str, dict] = field(default_factory=dict)  # source -> reason and retry_at, for the cursor
    new_partitions: list[str] = field(default_factory=list)
    runs: list[RunRequest] = field(default_factory=list)
    settled: set[str] = field(default_factory=set)  # run keys of the analyses requested this tick, or found done


def _register(
    context: SensorEvaluationContext,
    warehouse: DuckDBResource,
    entry: RegistryEntry,
    present: list[str],
    launched: set[str],
    now: float,
    tick: _Tick,
) -> None:
    """Load the entry's model, upsert it into the warehouse and add its partition and run to the
    tick; a model that does not load or a locked warehouse is a problem of the tick instead."""
    try:
        spec = replace(inspect_model(entry.source), language=entry.language)
    except ModelLoadError as error:
        tick.problems.append(RegistryProblem(entry.origin, str(error)))
        if not is_local_checkpoint(entry.source):
            tick.failed[entry.source] = {"reason": str(error), "retry_at": now + RETRY_UNLOADABLE_HUB_ID_SECONDS}
        return
    try:  # a short wait: the tick must end within Dagster's sensor timeout
        with closing(connect_warehouse(warehouse, LOCK_WAIT_SECONDS)) as conn:
            upsert_model(conn, spec)
    except WarehouseLockedError:
        tick.problems.append(RegistryProblem(entry.origin, "the warehouse is locked by another process; next tick"))
        return
    if not context.instance.has_dynamic_partition(model_partitions.name, spec.model_id):
        tick.new_partitions.append(spec.model_id)
    entry_runs, notes, entry_settled = _entry_runs(context.instance, entry, spec.model_id, present, launched)
    tick.problems.extend(RegistryProblem(entry.origin, note) for note in notes)
    tick.runs.extend(entry_runs)
    tick.settled |= entry_settled | ({language_key(entry)} if entry.language else set())


def _register_pending(
    context: SensorEvaluationContext,
    warehouse: DuckDBResource,
    pending: list[RegistryEntry],
    failures: dict[str, dict],
    present: list[str],
    launched: set[str],
    problems: list[RegistryProblem],
) -> _Tick:
    """Register the pending entries in order, but not a hub id whose earlier failure (`failures`,
    from the cursor) is still waiting to be retried, and none once the tick's loading budget is spent."""
    now = time.time()
    waiting = {source: failure for source, failure in failures.items() if failure["retry_at"] > now}
    tick = _Tick(problems)
    deadline = time.monotonic() + INSPECTION_BUDGET_SECONDS
    inspected = 0
    for entry in pending:
        if entry.source in waiting:
            failure = waiting[entry.source]
            tick.failed[entry.source] = failure  # still waiting: carried to the next cursor
            retry_at = datetime.fromtimestamp(failure["retry_at"], UTC).strftime("%H:%M:%S UTC")
            tick.problems.append(RegistryProblem(entry.origin, f"{failure['reason']} (tried again after {retry_at})"))
            continue
        if inspected and time.monotonic() > deadline:
            tick.problems.append(
                RegistryProblem(
                    entry.origin,
                    f"not checked yet: this tick spent its {INSPECTION_BUDGET_SECONDS} s of model loading; next tick",
                )
            )
            continue
        inspected += 1
        _register(context, warehouse, entry, present, launched, now, tick)
    return tick


def _tick_result(context: SensorEvaluationContext, tick: _Tick, launched: set[str]) -> SensorResult:
    """The tick's problems logged; its run requests (the views first while they were never
    materialized), new partitions and cursor, or why it skips."""
    for problem in tick.problems:
        context.log.warning(f"models registry: {problem}")
    runs, settled = tick.runs, tick.settled
    if runs and context.instance.get_latest_materialization_event(warehouse_views.key) is None:
        # The charts read the views: create them first, request the model runs on a later tick.
        runs = [RunRequest(run_key=f"warehouse_views:{sql_code_version()}", job_name=views_job.name)]
        settled = set()
    requested = launched | settled
    cursor = json.dumps({"launched": sorted(requested), "failed": tick.failed})
    partition_requests = [model_partitions.build_add_request(tick.new_partitions)] if tick.new_partitions else []
    if runs:
        return SensorResult(run_requests=runs, dynamic_partitions_requests=partition_requests, cursor=cursor)
    reason = (
        "; ".join(map(str, tick.problems))
        if tick.problems
        else "every registered model's analyses are already requested"
    )
    return SensorResult(skip_reason=SkipReason(reason), dynamic_partitions_requests=partition_requests, cursor=cursor)


@sensor(
    name="model_registry_sensor",
    jobs=[model_analysis_job, views_job],
    minimum_interval_seconds=MINIMUM_INTERVAL_SECONDS,
    default_status=DefaultSensorStatus.RUNNING,
    description="Registers the models of models.toml, models_cache/drop/ and models_cache/finetuned/, "
    "then requests one run per (model, analysis).",
)
def model_registry_sensor(
    context: SensorEvaluationContext, warehouse: DuckDBResource, data_dir: DataDirectory
) -> SensorResult | SkipReason:
    state = json.loads(context.cursor) if context.cursor else {}
    launched = set(state.get("launched", []))
    try:
        scan = scan_registry(registry_path(), drop_folders(), ANALYSES, CORPORA)
    except RegistryError as error:
        return SkipReason(str(error))
    problems = list(scan.problems)
    present = present_corpora(data_dir.root)
    pending = _pending(scan.entries, launched)
    tick = _register_pending(context, warehouse, pending, state.get("failed", {}), present, launched, problems)
    return _tick_result(context, tick, launched)
