"""Analyses: the groups of per-model assets a registered model gets, one run each.

The one list of what the registry sensor requests per (model, analysis); each analysis is
self-contained (model, corpora, its facts, its charts) so its run needs no other run.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from dagster import AssetKey, AssetsDefinition, AssetSelection, define_asset_job

from dagster_project.assets import all_assets, corpus_assets_by_name, encoder_model, fact_assets_by_corpus, hta_assets_by_corpus, warehouse_views
from dagster_project.assets.charts import CHARTS, chart_assets_by_name
from dagster_project.partitions import model_partitions


@dataclass(frozen=True)
class Analysis:
    name: str
    description: str
    default: bool  # requested for entries that name no analyses
    facts: Mapping[str, AssetsDefinition]  # fact asset per corpus it covers
    hta: bool  # draws the charts that need HTA (and only those)


ANALYSES = {
    analysis.name: analysis
    for analysis in (
        Analysis("attention", "Attention facts per corpus (Clark, Kovaleva, Pascual attention) and their charts.", True, fact_assets_by_corpus, hta=False),
        Analysis("hta", "Hidden Token Attribution (Pascual §4) and its charts; slow, on request.", False, hta_assets_by_corpus, hta=True),
    )
}
DEFAULT_ANALYSES = tuple(name for name, analysis in ANALYSES.items() if analysis.default)

model_analysis_job = define_asset_job(
    name="model_analysis",
    selection=AssetSelection.assets(*all_assets) - AssetSelection.assets(warehouse_views),
    description="Every per-model asset (model, corpora, attention facts, charts) for one model partition.",
)
views_job = define_asset_job(name="warehouse_views_job", selection=AssetSelection.assets(warehouse_views), description="(Re)create the SQL views.")


def analysed_corpora(analysis: Analysis, corpora: Iterable[str]) -> list[str]:
    """The corpora among `corpora` that `analysis` has facts for."""
    return [name for name in corpora if name in analysis.facts]


def analysis_asset_keys(analysis: Analysis, corpora: Iterable[str]) -> list[AssetKey]:
    """Model, corpus, fact and chart assets of `analysis` on `corpora`: a chart is included
    when one of the corpora it draws from is analysed."""
    covered = analysed_corpora(analysis, corpora)
    charts = [
        chart_assets_by_name[spec.name]
        for spec in CHARTS
        if spec.needs_hta == analysis.hta and set(spec.corpora) & set(covered)
    ]
    assets = [encoder_model, *(corpus_assets_by_name[name] for name in covered), *(analysis.facts[name] for name in covered), *charts]
    return [key for asset in assets for key in asset.keys]
