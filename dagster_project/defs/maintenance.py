"""The warehouse's maintenance on a schedule: nightly `warehouse_maintenance` (assets/views.py).

Running by default with the ducklake backend, whose writers only append; stopped with the
DuckDB file, where writes delete the rows they replace. It is the lake's only deleting
writer; a writer whose insert meets its delete in one table retries its transaction.
"""

from dagster import AssetSelection, DefaultScheduleStatus, ScheduleDefinition, define_asset_job

from dagster_project.defs.assets import warehouse_maintenance
from dagster_project.storage.backend import warehouse_backend

MAINTENANCE_CRON = "17 3 * * *"  # nightly, off the hour the refresh schedule starts on

maintenance_job = define_asset_job(
    name="warehouse_maintenance_job",
    selection=AssetSelection.assets(warehouse_maintenance),
)

maintenance_schedule = ScheduleDefinition(
    name="warehouse_maintenance_schedule",
    job=maintenance_job,
    cron_schedule=MAINTENANCE_CRON,
    default_status=DefaultScheduleStatus.RUNNING
    if warehouse_backend() == "ducklake"
    else DefaultScheduleStatus.STOPPED,
)
