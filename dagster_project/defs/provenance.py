"""What the run history says a materialization left in the warehouse, checked against the
warehouse itself. The history alone is not the truth: the file may be new (ATTN_WAREHOUSE moved,
the old one deleted) or restored from an older copy while `.dagster` stays. A writing asset
records its batch id and corpus (writing.write_partition), the views asset the SQL version it
applied (views.warehouse_views; each view carries the digest of its SQL, storage/views.py
views_are_current); a record whose write the warehouse does not hold is not current, whatever
its code and data versions say. A step finds the batch that its own run's materialization of an
upstream asset wrote (batch_written_in_run), not the latest, which may be another run's."""

from collections.abc import Mapping
from dataclasses import dataclass, field

from dagster import AssetExecutionContext, AssetKey, AssetRecordsFilter, EventLogRecord
from dagster_duckdb import DuckDBResource

from dagster_project.storage.backend import WarehouseConfig
from dagster_project.storage.batches import held_batches
from dagster_project.storage.views import views_are_current

BATCH_ID = "written_batch_id"
CORPUS = "written_corpus"
VIEWS_SQL_VERSION = "views_sql_version"


def _metadata_text(metadata: Mapping[str, object], name: str) -> str | None:
    value = metadata.get(name)
    return None if value is None else str(getattr(value, "value", value))


def batch_written_in_run(context: AssetExecutionContext, key: AssetKey) -> str | None:
    """The batch id that the run of `context` wrote when it materialized `key` for the step's
    partition (from the run's own materialization, not the latest, which may be another run's);
    None when this run did not materialize it."""
    run = context.instance.get_run_record_by_id(context.run.run_id)
    records_filter = AssetRecordsFilter(
        asset_key=key,
        asset_partitions=[context.partition_key],
        after_timestamp=run.create_timestamp.timestamp() if run else None,
    )
    cursor = None
    while True:
        found = context.instance.fetch_materializations(records_filter, limit=100, cursor=cursor)
        for record in found.records:
            if record.run_id == context.run.run_id and record.asset_materialization is not None:
                return _metadata_text(record.asset_materialization.metadata, BATCH_ID)
        if not found.has_more:
            return None
        cursor = found.cursor


@dataclass
class WarehouseEvidence:
    """Whether the warehouse's views are this SQL's, and its batches, read once; `describe` names it."""

    describe: str
    views_current: bool
    batches: frozenset[tuple[str, str, str]]
    unheld: list[AssetKey] = field(default_factory=list)  # records found not held, in the order asked

    @classmethod
    def read(cls, warehouse: DuckDBResource, config: WarehouseConfig | None = None) -> "WarehouseEvidence":
        """What `warehouse` holds (nothing where the configured warehouse does not exist yet)."""
        config = config or WarehouseConfig.from_env()
        if not config.exists():
            return cls(config.describe(), False, frozenset())
        with warehouse.get_connection() as conn:
            return cls(config.describe(), views_are_current(conn), held_batches(conn))

    def holds(self, key: AssetKey, partition_key: str | None, record: EventLogRecord) -> bool:
        """Whether the warehouse holds what `record` (the latest materialization) wrote: the views
        of this SQL, the batch it wrote. A record naming neither (a chart, the report) is taken at
        its word."""
        materialization = record.asset_materialization
        metadata = materialization.metadata if materialization else {}
        batch_id = _metadata_text(metadata, BATCH_ID)
        if VIEWS_SQL_VERSION in metadata:
            held = self.views_current
        elif batch_id is not None:
            held = (partition_key, _metadata_text(metadata, CORPUS), batch_id) in self.batches
        else:
            return True
        if not held and key not in self.unheld:
            self.unheld.append(key)
        return held

    def note(self) -> str | None:
        """One line on what the run history calls current but the warehouse lacks (None: nothing)."""
        if not self.unheld:
            return None
        names = ", ".join(key.to_user_string() for key in self.unheld)
        return (
            f"the run history has {len(self.unheld)} asset(s) that {self.describe} does not hold (a new, moved or "
            f"older warehouse): re-running {names}"
        )
