"""Dagster entry point: `dagster dev -w workspace.yaml` loads `defs` from here."""

from dagster import AssetSelection, Definitions, define_asset_job

from dagster_project.assets import all_assets
from dagster_project.partitions import model_partitions
from dagster_project.resources import default_resources

model_analysis_job = define_asset_job(
    name="model_analysis",
    selection=AssetSelection.assets(*all_assets) - AssetSelection.assets("warehouse_views"),
    partitions_def=model_partitions,
    description="Every per-model asset (model, corpora, attention facts, charts) for one model partition.",
)

defs = Definitions(assets=all_assets, jobs=[model_analysis_job], resources=default_resources())
