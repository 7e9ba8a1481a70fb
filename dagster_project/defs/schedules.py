"""The refresh schedule: re-materializes what is stale, and only that.

Each tick fingerprints the corpus files (a new fingerprint is reported as a new data
version of the external asset `<corpus>_files`), then asks Dagster's stale-status resolver, per model partition, which
materialized assets have a new code version (versioning.py) or a dependency with a new data
version. Those are re-run together with their materialized downstream assets (which would
be stale as soon as they are re-run); assets never materialized are left alone (no HTA for
a model that never asked). Unpartitioned assets (the SQL views) go first: while one is stale
the tick runs only those, and the per-model runs follow on a later tick.
"""

from collections.abc import Sequence
from dataclasses import dataclass, field

from dagster import (
    AssetKey,
    AssetMaterialization,
    AssetRecordsFilter,
    AssetsDefinition,
    AssetSelection,
    DagsterInstance,
    DagsterRunStatus,
    DefaultScheduleStatus,
    EventLogRecord,
    RunRequest,
    RunsFilter,
    ScheduleDefinition,
    ScheduleEvaluationContext,
    SkipReason,
    schedule,
)
from dagster._core.asset_graph_view.asset_graph_view import AssetGraphView, TemporalContext
from dagster._core.definitions.assets.graph.asset_graph import AssetGraph
from dagster._core.definitions.data_version import (
    DATA_VERSION_TAG,
    DEFAULT_DATA_VERSION,
    CachingStaleStatusResolver,
    StaleCause,
    StaleCauseCategory,
    StaleStatus,
    extract_data_provenance_from_entry,
)
from dagster._core.storage.tags import SCHEDULE_NAME_TAG
from dagster._time import get_current_datetime

from dagster_project.corpora import CORPORA
from dagster_project.defs.partitions import model_partitions
from dagster_project.defs.resources import DataDirectory
from dagster_project.defs.versioning import corpus_files_key, corpus_files_version

REFRESH_CRON = "0 * * * *"  # hourly; a tick with nothing stale launches nothing
SCHEDULE_NAME = "warehouse_refresh"
_IN_PROGRESS = [
    DagsterRunStatus.QUEUED,
    DagsterRunStatus.NOT_STARTED,
    DagsterRunStatus.STARTING,
    DagsterRunStatus.STARTED,
]


@dataclass(frozen=True)
class RefreshPlan:
    stale: dict[str | None, list[AssetKey]] = field(
        default_factory=dict
    )  # partition (None: unpartitioned) -> stale assets
    selections: dict[str | None, list[AssetKey]] = field(default_factory=dict)  # what each run re-materializes


def record_corpus_files(instance: DagsterInstance, data_dir: DataDirectory) -> list[AssetKey]:
    """Report a materialization of `<corpus>_files`, with the fingerprint as data version, for
    every corpus whose files changed since the last report (external assets take their data
    version from materializations)."""
    changed = []
    for name, spec in CORPORA.items():
        if not spec.files:
            continue
        key, version = corpus_files_key(name), corpus_files_version(spec, data_dir.root)
        if _reported_version(_latest_report(instance, key)) != version:
            instance.report_runless_asset_event(AssetMaterialization(asset_key=key, tags={DATA_VERSION_TAG: version}))
            changed.append(key)
    return changed


def _latest_report(
    instance: DagsterInstance, key: AssetKey, after_storage_id: int | None = None
) -> EventLogRecord | None:
    """The latest report of `key`, or with `after_storage_id` the first one after it."""
    records = instance.fetch_materializations(
        AssetRecordsFilter(asset_key=key, after_storage_id=after_storage_id),
        limit=1,
        ascending=after_storage_id is not None,
    ).records
    return records[0] if records else None


def _reported_version(record: EventLogRecord | None) -> str | None:
    return record.asset_materialization.tags.get(DATA_VERSION_TAG) if record and record.asset_materialization else None


def _is_unreported_input(instance: DagsterInstance, cause: StaleCause, asset_graph: AssetGraph) -> bool:
    """An external input never reported when the asset was materialized (recorded as INITIAL)
    and unchanged since its first report after that: a baseline, not a change."""
    dependency = cause.dependency_asset_key
    if cause.category != StaleCauseCategory.DATA or dependency is None or not asset_graph.get(dependency).is_external:
        return False
    record = instance.get_latest_data_version_record(
        cause.asset_key, is_source=False, partition_key=cause.partition_key
    )
    provenance = extract_data_provenance_from_entry(record.event_log_entry) if record else None
    if provenance is None or provenance.input_data_versions.get(dependency) != DEFAULT_DATA_VERSION:
        return False
    first_after = _latest_report(instance, dependency, after_storage_id=record.storage_id)
    return first_after is not None and _reported_version(first_after) == _reported_version(
        _latest_report(instance, dependency)
    )


def stale_asset_keys(
    instance: DagsterInstance, asset_graph: AssetGraph, keys: Sequence[AssetKey], partition_key: str | None
) -> list[AssetKey]:
    """Those of `keys` materialized for `partition_key` and stale (new code version, or a
    dependency with a new data version)."""
    resolver = CachingStaleStatusResolver(
        instance=instance,
        asset_graph=asset_graph,
        loading_context=AssetGraphView(
            temporal_context=TemporalContext(effective_dt=get_current_datetime(), last_event_id=None),
            instance=instance,
            asset_graph=asset_graph,
        ),
    )
    return [
        key
        for key in keys
        if resolver.get_status(key, partition_key) == StaleStatus.STALE
        and not all(
            _is_unreported_input(instance, cause, asset_graph)
            for cause in resolver.get_stale_causes(key, partition_key)
        )
    ]


def _materialized(instance: DagsterInstance, key: AssetKey, partition_key: str | None) -> bool:
    return instance.get_latest_data_version_record(key, is_source=False, partition_key=partition_key) is not None


def refresh_plan(instance: DagsterInstance, asset_graph: AssetGraph) -> RefreshPlan:
    """The stale assets and the runs that refresh them: the unpartitioned ones alone while
    any is stale, else one run per model partition with stale assets."""
    keys = sorted(asset_graph.materializable_asset_keys)
    unpartitioned = [key for key in keys if not asset_graph.get(key).is_partitioned]
    stale = stale_asset_keys(instance, asset_graph, unpartitioned, None)
    if stale:
        downstream = AssetSelection.assets(*stale).downstream().resolve(asset_graph)
        selection = [key for key in unpartitioned if key in downstream and _materialized(instance, key, None)]
        return RefreshPlan({None: stale}, {None: selection})
    partitioned = [key for key in keys if asset_graph.get(key).partitions_def == model_partitions]
    plan = RefreshPlan()
    for partition in instance.get_dynamic_partitions(model_partitions.name):
        stale = stale_asset_keys(instance, asset_graph, partitioned, partition)
        if stale:
            downstream = AssetSelection.assets(*stale).downstream().resolve(asset_graph)
            plan.stale[partition] = stale
            plan.selections[partition] = [
                key for key in partitioned if key in downstream and _materialized(instance, key, partition)
            ]
    return plan


def build_refresh_schedule(assets: Sequence[AssetsDefinition]) -> ScheduleDefinition:
    """The hourly refresh over `assets` (those of the Definitions it is registered with)."""
    asset_graph = AssetGraph.from_assets(assets)

    @schedule(
        name=SCHEDULE_NAME,
        cron_schedule=REFRESH_CRON,
        target=AssetSelection.all(),
        default_status=DefaultScheduleStatus.RUNNING,
        description="Re-materializes stale assets (changed code, changed corpus files) and what they feed, nothing else.",
    )
    def warehouse_refresh(context: ScheduleEvaluationContext, data_dir: DataDirectory) -> list[RunRequest] | SkipReason:
        in_progress = context.instance.get_run_records(
            RunsFilter(statuses=_IN_PROGRESS, tags={SCHEDULE_NAME_TAG: SCHEDULE_NAME}), limit=1
        )
        if in_progress:
            return SkipReason(f"refresh run {in_progress[0].dagster_run.run_id} is still in progress")
        changed = record_corpus_files(context.instance, data_dir)
        if changed:
            context.log.info(f"new corpus file versions: {', '.join(key.to_user_string() for key in changed)}")
        plan = refresh_plan(context.instance, asset_graph)
        if not plan.selections:
            return SkipReason("nothing is stale")
        for partition, stale in plan.stale.items():
            context.log.info(
                f"{partition or 'unpartitioned'}: stale {', '.join(key.to_user_string() for key in stale)}"
            )
        return [
            RunRequest(asset_selection=selection, partition_key=partition, tags={"refresh": "stale"})
            for partition, selection in plan.selections.items()
        ]

    return warehouse_refresh
