from dagster_project.defs.asset_display import displayed_assets
from dagster_project.defs.assets.charts import chart_assets
from dagster_project.defs.assets.clark.coreference import coreference_baselines_assets, coreference_baselines_by_corpus
from dagster_project.defs.assets.clark.gradients import grad_importance
from dagster_project.defs.assets.clark.head_clustering import head_mds
from dagster_project.defs.assets.clark.probes import dependency_probes
from dagster_project.defs.assets.compare.faithfulness import weighting_faithfulness_asset
from dagster_project.defs.assets.compare.head_matching import head_match_assets, head_match_assets_by_corpus
from dagster_project.defs.assets.corpora import corpus_assets, corpus_assets_by_name
from dagster_project.defs.assets.facts import fact_asset_checks, fact_assets, fact_assets_by_corpus
from dagster_project.defs.assets.kovaleva.finetuning import (
    ablation_assets_by_task,
    finetuned_assets_by_task,
    finetuning_assets,
)
from dagster_project.defs.assets.kovaleva.similarity import similarity_assets, similarity_assets_by_task
from dagster_project.defs.assets.models import encoder_model
from dagster_project.defs.assets.pascual.hta import hta_assets, hta_assets_by_corpus
from dagster_project.defs.assets.report import paper_report
from dagster_project.defs.assets.views import warehouse_maintenance, warehouse_views
from dagster_project.defs.versioning import versioned_assets

all_assets = [
    encoder_model,
    warehouse_views,
    warehouse_maintenance,
    *corpus_assets,
    *fact_assets,
    *coreference_baselines_assets,
    grad_importance,
    dependency_probes,
    head_mds,
    *head_match_assets,
    weighting_faithfulness_asset,
    *hta_assets,
    *finetuning_assets,
    *similarity_assets,
    *chart_assets,
    paper_report,
]
# Code versions and corpus-file inputs let the refresh schedule find what is stale (versioning.py);
# kinds and code references say in the UI what computes each asset and where (asset_display.py).
all_assets = displayed_assets(versioned_assets(all_assets))
# The checks that read the warehouse as it is, apart from any asset's own step (definitions.py).
all_asset_checks = [*fact_asset_checks]

__all__ = [
    "all_asset_checks",
    "all_assets",
    "chart_assets",
    "corpus_assets_by_name",
    "coreference_baselines_by_corpus",
    "dependency_probes",
    "encoder_model",
    "ablation_assets_by_task",
    "fact_assets_by_corpus",
    "finetuned_assets_by_task",
    "grad_importance",
    "head_match_assets_by_corpus",
    "head_mds",
    "hta_assets_by_corpus",
    "paper_report",
    "similarity_assets_by_task",
    "warehouse_maintenance",
    "warehouse_views",
]
