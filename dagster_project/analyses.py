"""Analyses: the groups of per-model assets a registered model gets, one run each.

The one list of what the registry sensor requests per (model, analysis). An analysis names
its targets (facts and charts); its run also materializes the per-model assets the targets
need (model, corpora, analysis assets), so it needs no other run. Charts depend on every
corpus's facts, so the upstream walk starts from the non-chart targets only.
"""

from collections.abc import Callable, Collection
from dataclasses import dataclass
from functools import cache

from dagster import AssetKey, AssetsDefinition, AssetSelection, define_asset_job
from dagster._core.definitions.assets.graph.asset_graph import AssetGraph

from dagster_project.assets import all_assets, fact_assets_by_corpus, hta_assets_by_corpus, warehouse_views
from dagster_project.assets.charts import CHARTS, ChartSpec, chart_assets_by_name
from dagster_project.partitions import model_partitions

CORPUS_SUFFIX = "_examples"


def _charts(corpora: Collection[str], keep: Callable[[ChartSpec], bool]) -> list[AssetsDefinition]:
    return [chart_assets_by_name[spec.name] for spec in CHARTS if keep(spec) and set(spec.corpora) & set(corpora)]


def _attention(corpora: Collection[str]) -> list[AssetsDefinition]:
    facts = [fact_assets_by_corpus[name] for name in corpora if name in fact_assets_by_corpus]
    return [*facts, *_charts(corpora, lambda spec: not spec.needs_hta and not spec.extra_deps)]


def _hta(corpora: Collection[str]) -> list[AssetsDefinition]:
    facts = [hta_assets_by_corpus[name] for name in corpora if name in hta_assets_by_corpus]
    return [*facts, *_charts(corpora, lambda spec: spec.needs_hta)]


def _with_analysis_assets(group: str) -> Callable[[Collection[str]], list[AssetsDefinition]]:
    """Targets: the charts whose extra analysis assets are all of asset group `group`, with those assets."""

    def targets(corpora: Collection[str]) -> list[AssetsDefinition]:
        charts = [
            spec
            for spec in CHARTS
            if spec.extra_deps
            and all(asset.group_names_by_key[key] == group for asset in spec.extra_deps for key in asset.keys)
            and set(spec.corpora) & set(corpora)
        ]
        return [asset for spec in charts for asset in (*spec.extra_deps, chart_assets_by_name[spec.name])]

    return targets


@dataclass(frozen=True)
class Analysis:
    name: str
    description: str
    default: bool  # requested for entries that name no analyses
    targets: Callable[[Collection[str]], list[AssetsDefinition]]  # given the entry's corpora


ANALYSES = {
    analysis.name: analysis
    for analysis in (
        Analysis(
            "attention",
            "Attention facts per corpus and the charts drawn from them (Clark, Kovaleva, Pascual).",
            True,
            _attention,
        ),
        Analysis("hta", "Hidden Token Attribution (Pascual §4) and its charts; slow.", False, _hta),
        Analysis(
            "clark",
            "Clark §3.2-6 analyses over the facts (gradient importance, head MDS, dependency probes, "
            "coreference baselines) for the chosen corpora, with their charts.",
            True,
            _with_analysis_assets("analysis"),
        ),
        Analysis(
            "finetuning",
            "Kovaleva fine-tuning of the chosen GLUE tasks (Table 1), head/layer disabling and base vs "
            "fine-tuned similarity, with their charts; slow on a CPU.",
            False,
            _with_analysis_assets("finetuning"),
        ),
    )
}
DEFAULT_ANALYSES = tuple(name for name, analysis in ANALYSES.items() if analysis.default)

model_analysis_job = define_asset_job(
    name="model_analysis",
    selection=AssetSelection.assets(*all_assets).materializable() - AssetSelection.assets(warehouse_views),
    description="Every per-model asset (model, corpora, attention facts, charts) for one model partition.",
)
views_job = define_asset_job(
    name="warehouse_views_job",
    selection=AssetSelection.assets(warehouse_views),
    description="(Re)create the SQL views.",
)


@cache
def _asset_graph() -> AssetGraph:
    return AssetGraph.from_assets(all_assets)


def analysis_asset_keys(analysis: Analysis, corpora: Collection[str], present: Collection[str]) -> list[AssetKey]:
    """What the run of `analysis` for an entry with `corpora` materializes: its targets and
    the per-model assets upstream of the non-chart ones. A target needing a corpus that is
    not `present` (files missing) is left out, with the charts drawn from it."""
    graph = _asset_graph()
    chart_keys = {AssetKey(name) for name in chart_assets_by_name}
    selected: set[AssetKey] = set()
    for target in analysis.targets(corpora):
        keys = set(target.keys)
        if not keys & chart_keys:
            keys = {
                key
                for key in AssetSelection.assets(target).upstream().resolve(graph)
                if graph.get(key).partitions_def == model_partitions
            }
        needed = {key.path[-1].removesuffix(CORPUS_SUFFIX) for key in keys if key.path[-1].endswith(CORPUS_SUFFIX)}
        if needed <= set(present):
            selected |= keys
    return sorted(
        (selected - chart_keys) | {key for key in selected & chart_keys if _chart_drawable(graph, key, selected)}
    )


def _chart_drawable(graph: AssetGraph, chart: AssetKey, selected: set[AssetKey]) -> bool:
    """A chart with analysis assets is drawn when some of them are in the run (its view reads
    them), any other chart when some of the facts it reads are."""
    spec = next(spec for spec in CHARTS if spec.name == chart.path[-1])
    extras = {key for asset in spec.extra_deps for key in asset.keys}
    return bool((extras or set(graph.get(chart).parent_keys)) & selected)
