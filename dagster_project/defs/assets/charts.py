"""Chart assets, one per entry of the chart registry: the paper figure drawn from its SQL
view, saved as HTML + PNG and shown in the Dagster UI as the materialization's metadata."""

import base64

from dagster import AssetExecutionContext, AssetsDefinition, MaterializeResult, MetadataValue, asset
from dagster_duckdb import DuckDBResource

from dagster_project.defs.assets.clark.coreference import coreference_baselines_assets
from dagster_project.defs.assets.clark.gradients import grad_importance
from dagster_project.defs.assets.clark.head_clustering import head_mds
from dagster_project.defs.assets.clark.probes import dependency_probes
from dagster_project.defs.assets.compare.faithfulness import weighting_faithfulness_asset
from dagster_project.defs.assets.compare.head_matching import head_match_assets
from dagster_project.defs.assets.facts import fact_assets
from dagster_project.defs.assets.kovaleva.finetuning import ablation_assets_by_task, finetuned_assets_by_task
from dagster_project.defs.assets.kovaleva.similarity import similarity_assets
from dagster_project.defs.assets.pascual.hta import hta_assets
from dagster_project.defs.assets.views import warehouse_views
from dagster_project.defs.partitions import model_partitions
from dagster_project.defs.resources import ChartFolder
from dagster_project.presentation.chart_registry import CHARTS, ChartSpec
from dagster_project.presentation.charts.common import save_chart

# The assets that write the analysis tables chart views read (ChartSpec.reads).
TABLE_WRITERS: dict[str, list[AssetsDefinition]] = {
    "head_mds": [head_mds],
    "grad_importance": [grad_importance],
    "coref_baseline_predictions": coreference_baselines_assets,
    "probe_scores": [dependency_probes],
    "task_scores": list(finetuned_assets_by_task.values()),
    "ablation_scores": list(ablation_assets_by_task.values()),
    "finetune_cosines": similarity_assets,
    "head_matches": head_match_assets,
    "saliency_correlations": [weighting_faithfulness_asset],
}


def analysis_inputs(spec: ChartSpec) -> list[AssetsDefinition]:
    """The analysis assets whose tables the chart's view reads besides the facts."""
    return [writer for table in spec.reads for writer in TABLE_WRITERS[table]]


def build_chart_asset(spec: ChartSpec) -> AssetsDefinition:
    @asset(
        name=spec.name,
        description=(
            f"{spec.label}, from the `{spec.view}` view (corpus: {'every one' if spec.all_corpora else 'first'} of "
            f"{', '.join(spec.corpora)} with rows{'; every model beside the partition' if spec.all_models else ''})."
        ),
        partitions_def=model_partitions,
        deps=[warehouse_views, *(hta_assets if spec.analysis == "hta" else fact_assets), *analysis_inputs(spec)],
        group_name="charts",
        tags={"analysis": spec.analysis, "paper": spec.paper},
    )
    def chart_asset(
        context: AssetExecutionContext, warehouse: DuckDBResource, chart_folder: ChartFolder
    ) -> MaterializeResult:
        model_id = context.partition_key
        with warehouse.get_connection() as conn:
            found = spec.rows(conn, model_id)
        if found is None and spec.when_empty:
            context.log.warning(
                f"{spec.name}: view {spec.view} has no rows for model '{model_id}' on {spec.corpora}; "
                f"skipped: {spec.when_empty}"
            )
            return MaterializeResult(metadata={"skipped": spec.when_empty, "view": spec.view, "view_rows": 0})
        if found is None:
            raise ValueError(
                f"View {spec.view} has no rows for model '{model_id}' on {spec.corpora}: "
                "materialize the corpus and attention-fact assets first."
            )
        corpus, rows = found
        html, png = save_chart(spec.draw(rows, spec.title(rows, corpus)), chart_folder.for_model(model_id), spec.name)
        context.log.info(f"Wrote {html} and {png}")
        encoded = base64.b64encode(png.read_bytes()).decode()
        return MaterializeResult(
            metadata={
                "chart": MetadataValue.md(f"![{spec.label}](data:image/png;base64,{encoded})"),
                "html": MetadataValue.path(str(html)),
                "png": MetadataValue.path(str(png)),
                "model": spec.source(rows),  # the title has the short name
                "corpus": corpus,
                "view": spec.view,
                "view_rows": rows.height,
            }
        )

    return chart_asset


chart_assets_by_name = {spec.name: build_chart_asset(spec) for spec in CHARTS}
chart_assets = list(chart_assets_by_name.values())
