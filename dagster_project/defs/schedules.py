"""The refresh schedule: re-materializes what is stale, and only that.

Each tick fingerprints the corpus files (a new fingerprint is reported as a new data
version of the external asset `<corpus>_files`), then finds, per model partition, which
materialized assets have a new code version (versioning.py) or a dependency with a new data
version. Those are re-run together with their materialized downstream assets (which would
be stale as soon as they are re-run), the report included; assets never materialized are left
alone (no HTA for a model that never asked). Unpartitioned assets (the SQL views) go first: while one is stale
the tick runs only those, and the per-model runs follow on a later tick.

Staleness is staleness.py's: from the public event records, with the rules of Dagster's own
stale status.
"""

from collections.abc import Sequence
from dataclasses import dataclass, field

from dagster import (
    AssetKey,
    AssetMaterialization,
    AssetsDefinition,
    AssetSelection,
    DagsterInstance,
    DagsterRunStatus,
    DefaultScheduleStatus,
    RunRequest,
    RunsFilter,
    ScheduleDefinition,
    ScheduleEvaluationContext,
    SkipReason,
    schedule,
)

from dagster_project.corpora import CORPORA
from dagster_project.defs.partitions import model_partitions
from dagster_project.defs.resources import DataDirectory
from dagster_project.defs.staleness import (
    DATA_VERSION_TAG,
    AssetTable,
    StalenessCheck,
    is_materialized,
    latest_materialization,
    recorded_data_version,
    stale_asset_keys,
)
from dagster_project.defs.versioning import corpus_files_key, corpus_files_version

REFRESH_CRON = "0 * * * *"  # hourly; a tick with nothing stale launches nothing
SCHEDULE_NAME = "warehouse_refresh"
_IN_PROGRESS = [
    DagsterRunStatus.QUEUED,
    DagsterRunStatus.NOT_STARTED,
    DagsterRunStatus.STARTING,
    DagsterRunStatus.STARTED,
]
SCHEDULE_NAME_TAG = "dagster/schedule_name"  # the tag Dagster writes on a schedule's runs


@dataclass(frozen=True)
class RefreshPlan:
    """What a tick found stale and the runs it launches, per partition."""

    # partition (None: unpartitioned) -> its stale assets, and what its run re-materializes
    stale: dict[str | None, list[AssetKey]] = field(default_factory=dict)
    selections: dict[str | None, list[AssetKey]] = field(default_factory=dict)


def record_corpus_files(instance: DagsterInstance, data_dir: DataDirectory) -> list[AssetKey]:
    """Report a materialization of `<corpus>_files`, with the fingerprint as data version, for
    every corpus whose files changed since the last report (external assets take their data
    version from materializations)."""
    changed = []
    for name, spec in CORPORA.items():
        if not spec.files:
            continue
        key, version = corpus_files_key(name), corpus_files_version(spec, data_dir.root)
        if recorded_data_version(latest_materialization(instance, key)) != version:
            instance.report_runless_asset_event(AssetMaterialization(asset_key=key, tags={DATA_VERSION_TAG: version}))
            changed.append(key)
    return changed


def refresh_plan(
    instance: DagsterInstance,
    assets: Sequence[AssetsDefinition],
) -> RefreshPlan:
    """The stale assets and the runs that refresh them: the unpartitioned ones alone while
    any is stale, else one run per model partition with stale assets."""
    table = AssetTable(assets)
    check = StalenessCheck(instance, table)
    keys = sorted(table.materializable)
    unpartitioned = [key for key in keys if table.specs[key].partitions_def is None]
    stale = stale_asset_keys(check, unpartitioned, None)
    if stale:
        downstream = table.downstream(stale)
        selection = [key for key in unpartitioned if key in downstream and is_materialized(check, key, None)]
        return RefreshPlan({None: stale}, {None: selection})
    partitioned = [key for key in keys if table.specs[key].partitions_def == model_partitions]
    plan = RefreshPlan()
    for partition in instance.get_dynamic_partitions(model_partitions.name):
        stale = stale_asset_keys(check, partitioned, partition)
        if stale:
            downstream = table.downstream(stale)
            plan.stale[partition] = stale
            # With them the unpartitioned assets they feed (the report), so it shows the new rows.
            plan.selections[partition] = [
                key
                for key in keys
                if key in downstream and is_materialized(check, key, partition if key in partitioned else None)
            ]
    return plan


def build_refresh_schedule(assets: Sequence[AssetsDefinition]) -> ScheduleDefinition:
    """The hourly refresh over `assets` (those of the Definitions it is registered with)."""

    @schedule(
        name=SCHEDULE_NAME,
        cron_schedule=REFRESH_CRON,
        target=AssetSelection.all(),
        default_status=DefaultScheduleStatus.RUNNING,
        description="Re-materializes stale assets (changed code, changed corpus files) and what they feed, "
        "nothing else.",
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
        plan = refresh_plan(context.instance, assets)
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
