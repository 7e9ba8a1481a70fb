"""Dagster entry point: `dagster dev -w workspace.yaml` loads `defs` from here."""

from dagster import Definitions

from dagster_project.defs.assets import all_asset_checks, all_assets
from dagster_project.defs.jobs import model_analysis_job, views_job
from dagster_project.defs.maintenance import maintenance_job, maintenance_schedule
from dagster_project.defs.resources import default_resources
from dagster_project.defs.schedules import build_refresh_schedule
from dagster_project.defs.sensors import model_registry_sensor

defs = Definitions(
    assets=all_assets,
    asset_checks=all_asset_checks,
    jobs=[model_analysis_job, views_job, maintenance_job],
    sensors=[model_registry_sensor],
    schedules=[build_refresh_schedule(all_assets), maintenance_schedule],
    resources=default_resources(),
)
