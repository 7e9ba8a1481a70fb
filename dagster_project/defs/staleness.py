"""Which materialized asset partitions are stale, from the public event records: the latest
materialization's tags hold the code version, data version and input data versions Dagster
recorded, read here with the rules of Dagster's own stale status, plus one of this project: an
external input never reported when the asset was materialized is a baseline when it is first
reported, not a change (_is_unreported_input). With the warehouse's evidence (provenance.py), a
record whose write the warehouse does not hold is stale too. The refresh schedule, the registry
sensor's runs and the CLI's run planning ask it what to redo."""

from collections.abc import Iterable, Mapping, Sequence

from dagster import (
    AssetKey,
    AssetRecordsFilter,
    AssetsDefinition,
    AssetSelection,
    AssetSpec,
    DagsterInstance,
    EventLogRecord,
    PartitionsDefinition,
)

from dagster_project.defs.partitions import model_partitions
from dagster_project.defs.provenance import WarehouseEvidence

# The tags Dagster writes on materializations (stable strings of its event log).
CODE_VERSION_TAG = "dagster/code_version"
DATA_VERSION_TAG = "dagster/data_version"
INPUT_DATA_VERSION_PREFIX = "dagster/input_data_version/"
INPUT_EVENT_POINTER_PREFIX = "dagster/input_event_pointer/"
# Data versions Dagster uses for an input without a recorded one: INITIAL is recorded for an
# input that had no version when the asset ran (an unreported external input, an unmaterialized
# dependency); NULL stands for a materializable asset that was never materialized.
INITIAL_DATA_VERSION = "INITIAL"
NULL_DATA_VERSION = "NULL"
NULL_EVENT_POINTER = "NULL"


class AssetTable:
    """The specs of a list of asset definitions and what the plan asks of them, from public
    definitions only (AssetsDefinition.get_asset_spec, AssetSelection.resolve)."""

    def __init__(self, assets: Sequence[AssetsDefinition]) -> None:
        self.assets = list(assets)
        self.specs: dict[AssetKey, AssetSpec] = {
            key: asset.get_asset_spec(key) for asset in self.assets for key in asset.keys
        }
        self.materializable = AssetSelection.all().resolve(self.assets)

    def is_external(self, key: AssetKey) -> bool:
        """Not materializable here: an external asset, or a dependency defined elsewhere."""
        return key not in self.materializable

    def partitions_def(self, key: AssetKey) -> PartitionsDefinition | None:
        spec = self.specs.get(key)
        return spec.partitions_def if spec else None

    def downstream(self, keys: Iterable[AssetKey]) -> set[AssetKey]:
        """`keys` and every asset downstream of them."""
        return set(AssetSelection.assets(*keys).downstream().resolve(self.assets))


def latest_materialization(
    instance: DagsterInstance,
    key: AssetKey,
    partition_key: str | None = None,
    *,
    after_storage_id: int | None = None,
    before_storage_id: int | None = None,
    first: bool = False,
) -> EventLogRecord | None:
    """The latest materialization of `key` (of `partition_key` if given) in the storage-id
    window, or with `first` the earliest one."""
    records = instance.fetch_materializations(
        AssetRecordsFilter(
            asset_key=key,
            asset_partitions=[partition_key] if partition_key is not None else None,
            after_storage_id=after_storage_id,
            before_storage_id=before_storage_id,
        ),
        limit=1,
        ascending=first,
    ).records
    return records[0] if records else None


def _tags(record: EventLogRecord | None) -> Mapping[str, str]:
    materialization = record.asset_materialization if record else None
    return (materialization.tags or {}) if materialization else {}


def recorded_data_version(record: EventLogRecord | None) -> str | None:
    """The data version a materialization recorded; None without a record or a version."""
    return _tags(record).get(DATA_VERSION_TAG) if record else None


def _pointer(value: str | None) -> int | None:
    return None if value in (None, NULL_EVENT_POINTER) else int(value)


class StalenessCheck:
    """Which materialized asset partitions are stale, read from the latest materializations:
    a new code version, a removed or new dependency, or a dependency
    whose data version changed since the asset recorded it; with `evidence`, also a record
    whose write the warehouse does not hold (provenance.py). Records are cached: one check
    answers for one moment."""

    def __init__(
        self,
        instance: DagsterInstance,
        table: AssetTable,
        evidence: WarehouseEvidence | None = None,
    ) -> None:
        self.instance = instance
        self.table = table
        self.evidence = evidence
        self._records: dict[tuple[AssetKey, str | None], EventLogRecord | None] = {}

    def latest(self, key: AssetKey, partition_key: str | None) -> EventLogRecord | None:
        if (key, partition_key) not in self._records:
            self._records[key, partition_key] = latest_materialization(self.instance, key, partition_key)
        return self._records[key, partition_key]

    def current_data_version(self, key: AssetKey, partition_key: str | None) -> str:
        """What Dagster calls the current data version: the latest recorded one, INITIAL for an
        external asset never reported (or a record without one), NULL if never materialized."""
        record = self.latest(key, partition_key)
        if record is None:
            return INITIAL_DATA_VERSION if self.table.is_external(key) else NULL_DATA_VERSION
        return recorded_data_version(record) or INITIAL_DATA_VERSION

    def code_is_current(self, key: AssetKey, recorded: str | None) -> bool:
        """The recorded code version is the current one (or the asset has none)."""
        current = self.table.specs[key].code_version
        return not current or recorded == current

    def is_stale(self, key: AssetKey, partition_key: str | None) -> bool:
        """Materialized for `partition_key`, and its code or one of its inputs changed since."""
        record = self.latest(key, partition_key)
        if record is None:
            return False  # never materialized: missing, not stale
        if self.evidence is not None and not self.evidence.holds(key, partition_key, record):
            return True
        tags = _tags(record)
        spec = self.table.specs[key]
        deps = [dep.asset_key for dep in spec.deps]
        if CODE_VERSION_TAG not in tags:  # no provenance (very old event): a newer dependency counts
            return any(
                (later := self.latest(dep, partition_key if self.table.partitions_def(dep) else None)) is not None
                and later.storage_id > record.storage_id
                for dep in deps
                if not self.table.is_external(dep)
            )
        if not self.code_is_current(key, tags[CODE_VERSION_TAG]):
            return True
        inputs = {
            tag.removeprefix(INPUT_DATA_VERSION_PREFIX) for tag in tags if tag.startswith(INPUT_DATA_VERSION_PREFIX)
        }
        if inputs - {dep.to_user_string() for dep in deps}:
            return True  # a removed dependency
        return any(self._dependency_changed(key, record, tags, dep, partition_key) for dep in deps)

    def _dependency_changed(
        self, key: AssetKey, record: EventLogRecord, tags: Mapping[str, str], dep: AssetKey, partition_key: str | None
    ) -> bool:
        """Whether `dep` changed since `key` recorded it as input (or is a new dependency)."""
        name = dep.to_user_string()
        recorded = tags.get(INPUT_DATA_VERSION_PREFIX + name)
        if recorded is None or INPUT_EVENT_POINTER_PREFIX + name not in tags:
            return True  # a new dependency
        spec, dep_partitions = self.table.specs[key], self.table.partitions_def(dep)
        if dep_partitions is None:
            current = self.current_data_version(dep, None)
            if recorded == current or (recorded == INITIAL_DATA_VERSION and current == NULL_DATA_VERSION):
                return False  # unchanged; INITIAL then NULL: never materialized, then as now
            return not self._is_unreported_input(record, recorded, dep)
        # A partitioned input is recorded as a hash of its partitions' data versions and the
        # storage id of the input's latest event then: compare, per input partition, its latest
        # data version with the one it had at that storage id (Dagster's own rule; with no event
        # then, NULL, any materialization since is a change).
        pointer = _pointer(tags[INPUT_EVENT_POINTER_PREFIX + name])
        if dep_partitions == spec.partitions_def:
            upstream_partitions = [partition_key]
        else:  # many partitions feed one (the report reads every model's charts)
            upstream_partitions = dep_partitions.get_partition_keys(dynamic_partitions_store=self.instance)
        for upstream in upstream_partitions:
            after = (
                self.latest(dep, upstream)
                if pointer is None
                else latest_materialization(self.instance, dep, upstream, after_storage_id=pointer)
            )
            if after is None:
                continue
            before = (
                None
                if pointer is None
                else latest_materialization(self.instance, dep, upstream, before_storage_id=pointer + 1)
            )
            if recorded_data_version(after) != recorded_data_version(before):
                return True
        return False

    def _is_unreported_input(self, record: EventLogRecord, recorded: str, dep: AssetKey) -> bool:
        """An external input never reported when the asset was materialized (recorded as INITIAL)
        and unchanged since its first report after that: a baseline, not a change."""
        if recorded != INITIAL_DATA_VERSION or not self.table.is_external(dep):
            return False
        first_after = latest_materialization(self.instance, dep, after_storage_id=record.storage_id, first=True)
        return first_after is not None and recorded_data_version(first_after) == recorded_data_version(
            self.latest(dep, None)
        )


def stale_asset_keys(check: StalenessCheck, keys: Sequence[AssetKey], partition_key: str | None) -> list[AssetKey]:
    """Those of `keys` materialized for `partition_key` and stale (new code version, or a
    dependency with a new data version)."""
    return [key for key in keys if check.is_stale(key, partition_key)]


def up_to_date_keys(
    instance: DagsterInstance,
    assets: Sequence[AssetsDefinition],
    keys: Iterable[AssetKey],
    partition_key: str,
    evidence: WarehouseEvidence | None = None,
) -> set[AssetKey]:
    """Those of `keys` materialized (for `partition_key` where partitioned by model) and not stale
    (with `evidence`: and held by the warehouse): what a run need not redo. The CLI and the
    registry sensor leave them out of their runs."""
    table = AssetTable(assets)
    check = StalenessCheck(instance, table, evidence)
    current = set()
    for key in keys:
        partition = partition_key if table.partitions_def(key) == model_partitions else None
        if is_materialized(check, key, partition) and not check.is_stale(key, partition):
            current.add(key)
    return current


def is_materialized(check: StalenessCheck, key: AssetKey, partition_key: str | None) -> bool:
    """Whether `key` has a materialization (for `partition_key` where given)."""
    return check.latest(key, partition_key) is not None
