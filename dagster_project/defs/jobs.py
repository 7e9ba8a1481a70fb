"""Analyses: the sets of per-model assets a registered model gets, one run each, and the jobs.

The one list of what the registry sensor and the CLI request per (model, analysis). An
analysis's targets are the assets tagged with it (tags.ANALYSIS): its per-corpus assets of the
chosen corpora, its charts that draw a chosen corpus, and the analysis assets those charts
read. Its run also materializes the per-model assets the targets need (model, corpora,
facts), so it needs no other run. Charts depend on every corpus's facts, so the upstream walk
starts from the non-chart targets only.
"""

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

from dagster import AssetKey, AssetsDefinition, AssetSelection, AssetSpec, DagsterInstance, define_asset_job

from dagster_project.defs.assets import all_assets, paper_report, warehouse_views
from dagster_project.defs.assets.charts import analysis_inputs, chart_assets_by_name
from dagster_project.defs.assets.compare.faithfulness import weighting_faithfulness_asset
from dagster_project.defs.assets.compare.head_matching import head_match_assets
from dagster_project.defs.partitions import model_partitions
from dagster_project.defs.provenance import WarehouseEvidence
from dagster_project.defs.staleness import up_to_date_keys
from dagster_project.defs.tags import ANALYSIS, CORPUS
from dagster_project.presentation.chart_registry import CHARTS


@dataclass(frozen=True)
class Analysis:
    name: str
    description: str
    default: bool  # requested for entries that name no analyses


ANALYSES = {
    analysis.name: analysis
    for analysis in (
        Analysis(
            "attention", "Attention facts per corpus and the charts drawn from them (Clark, Kovaleva, Pascual).", True
        ),
        Analysis("hta", "Hidden Token Attribution (Pascual §4) and its charts; slow.", False),
        Analysis(
            "clark",
            "Clark §3.2-6 analyses over the facts (gradient importance, head MDS, dependency probes, "
            "coreference baselines) for the chosen corpora, with their charts.",
            True,
        ),
        Analysis(
            "finetuning",
            "Kovaleva fine-tuning of the chosen GLUE tasks (Table 1), head/layer disabling and base vs "
            "fine-tuned similarity, with their charts; slow on a CPU.",
            False,
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


_SPECS: dict[AssetKey, AssetSpec] = {key: asset.get_asset_spec(key) for asset in all_assets for key in asset.keys}
_CHART_KEYS = frozenset(asset.key for asset in chart_assets_by_name.values())
_HEAD_MATCH_KEYS = frozenset(asset.key for asset in head_match_assets)
# The steps that explain a classifier's predictions, with the charts drawn from them alone: a model
# without a single-label classification head gets no rows from them.
_CLASSIFIER_KEYS = frozenset(
    {weighting_faithfulness_asset.key}
    | {
        chart_assets_by_name[spec.name].key
        for spec in CHARTS
        if spec.reads and {asset.key for asset in analysis_inputs(spec)} == {weighting_faithfulness_asset.key}
    }
)


def analysis_targets(analysis: Analysis, corpora: Collection[str]) -> list[AssetsDefinition]:
    """The assets tagged with `analysis` that its run for `corpora` targets: those of a chosen
    corpus, and the ones without a corpus tag that a chart drawn from a chosen corpus reads."""
    charts = [spec for spec in CHARTS if spec.analysis == analysis.name and set(spec.corpora) & set(corpora)]
    read = {key for spec in charts for asset in analysis_inputs(spec) for key in asset.keys}
    tagged = AssetSelection.tag(ANALYSIS, analysis.name).resolve(all_assets)
    chosen = {
        key
        for key in tagged
        if _SPECS[key].tags.get(CORPUS) in corpora or (key in read and CORPUS not in _SPECS[key].tags)
    }
    return [
        *(asset for asset in all_assets if set(asset.keys) & chosen and asset.key not in _CHART_KEYS),
        *(chart_assets_by_name[spec.name] for spec in charts),
    ]


def analysis_asset_keys(analysis: Analysis, corpora: Collection[str], present: Collection[str]) -> list[AssetKey]:
    """What the run of `analysis` for an entry with `corpora` materializes: its targets and
    the per-model assets upstream of the non-chart ones. A target needing a corpus that is
    not `present` (files missing), or reading none of `corpora`, is left out, with the charts
    drawn from it."""
    selected: set[AssetKey] = set()
    for target in analysis_targets(analysis, corpora):
        keys = set(target.keys)
        if not keys & _CHART_KEYS:
            upstream = AssetSelection.assets(target).upstream().resolve(all_assets)
            keys = {key for key in upstream if _SPECS[key].partitions_def == model_partitions}
        needed = {_SPECS[key].tags[CORPUS] for key in keys if CORPUS in _SPECS[key].tags}
        # An analysis asset without a corpus of its own (a chart's input) comes when it reads a chosen corpus.
        if needed <= set(present) and (not needed or needed & set(corpora)):
            selected |= keys
    charts = selected & _CHART_KEYS
    return sorted((selected - charts) | {key for key in charts if _chart_drawable(key, selected)})


@dataclass(frozen=True)
class ModelRun:
    """What one run for a model materializes, and what it leaves out as already done."""

    keys: list[AssetKey]
    up_to_date: list[AssetKey]  # materialized at the current code version, inputs unchanged
    skipped: list[str] = field(default_factory=list)  # one line per kind of step left out: it cannot write rows


def plan_model_run(
    instance: DagsterInstance,
    analyses: Iterable[Analysis],
    corpora: Collection[str],
    present: Collection[str],
    model_id: str,
    rerun_targets: bool = False,
    required: Collection[AssetKey] = (),
    others_corpora: Collection[str] | None = None,
    evidence: WarehouseEvidence | None = None,
    classifier: bool | None = None,
) -> ModelRun:
    """The one run of `analyses` for `model_id` (one run per model, so two analyses never
    compute a shared asset twice). Assets materialized and not stale are left out, unless they
    are `required`, or targets of the analyses with `rerun_targets` (an explicit CLI run); what
    lies downstream of anything re-run is re-run with it. A run that draws a chart also writes
    the report, so the report never lags behind the charts. Head matching, which compares the model
    with the other registered models, is left out (one line in `skipped`) when there is no other
    model, or none with examples of the corpus (`others_corpora`: the corpora other models have in the
    warehouse; None: not known, only the first rule applies). The weighting faithfulness, which explains a
    classifier's predictions, is left out (one line in `skipped`) where `classifier` is False: the model has
    no single-label classification head (None: not known, kept)."""
    targets: set[AssetKey] = set()
    wanted: set[AssetKey] = set()
    for analysis in analyses:
        keys = analysis_asset_keys(analysis, corpora, present)
        wanted |= set(keys)
        targets |= {key for asset in analysis_targets(analysis, corpora) for key in asset.keys} & set(keys)
    skipped = []
    others = set(instance.get_dynamic_partitions(model_partitions.name)) - {model_id}
    unmatched = {
        key
        for key in wanted & _HEAD_MATCH_KEYS
        if not others or (others_corpora is not None and _SPECS[key].tags[CORPUS] not in others_corpora)
    }
    if unmatched:
        wanted -= unmatched
        skipped.append(
            f"head matching ({len(unmatched)} corpora) not scheduled: it compares a model with the other registered "
            "models on the same corpus, and "
            + ("there is none yet" if not others else "none of them has examples of these corpora yet")
        )
    if classifier is False and wanted & _CLASSIFIER_KEYS:
        wanted -= _CLASSIFIER_KEYS
        skipped.append(
            "weighting faithfulness not scheduled: it explains a classifier's predictions, and this model has no "
            "single-label classification head (a checkpoint fine-tuned on SST-2 gets it in its own run)"
        )
    current = up_to_date_keys(instance, all_assets, wanted, model_id, evidence)
    redo = (wanted - current) | (set(required) & wanted) | (targets & wanted if rerun_targets else set())
    redo |= set(AssetSelection.assets(*redo).downstream().resolve(all_assets)) & wanted if redo else set()
    if redo & _CHART_KEYS:
        redo.add(paper_report.key)
    return ModelRun(sorted(redo), sorted(current - redo), skipped)


def _chart_drawable(chart: AssetKey, selected: set[AssetKey]) -> bool:
    """A chart reading analysis tables is drawn when some of their assets are in the run (its
    view reads them), any other chart when some of the facts it reads are."""
    spec = next(spec for spec in CHARTS if spec.name == chart.path[-1])
    inputs = {key for asset in analysis_inputs(spec) for key in asset.keys}
    return bool((inputs or {dep.asset_key for dep in _SPECS[chart].deps}) & selected)
