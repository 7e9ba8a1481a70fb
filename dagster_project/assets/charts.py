"""Chart assets: paper figures drawn from the SQL views, saved as HTML + PNG and shown
in the Dagster UI as the materialization's metadata."""

import base64
from collections.abc import Callable
from dataclasses import dataclass

import altair as alt
import duckdb
import polars as pl
from dagster import AssetExecutionContext, AssetsDefinition, MaterializeResult, MetadataValue, asset
from dagster_duckdb import DuckDBResource

from dagster_project import charts
from dagster_project.assets.coreference import coreference_baselines
from dagster_project.assets.facts import fact_assets
from dagster_project.assets.finetuning import FINETUNE_TASKS, ablation_assets_by_task
from dagster_project.assets.gradients import grad_importance
from dagster_project.assets.head_clustering import head_mds
from dagster_project.assets.hta import hta_assets
from dagster_project.assets.kovaleva import similarity_assets
from dagster_project.assets.probes import dependency_probes
from dagster_project.assets.views import warehouse_views
from dagster_project.corpora import GLUE_TASKS
from dagster_project.partitions import model_partitions
from dagster_project.resources import ChartFolder
from dagster_project.warehouse import partition_rows


@dataclass(frozen=True)
class ChartSpec:
    name: str
    figure: str
    view: str
    corpora: tuple[str, ...]  # first one with rows for the model is drawn
    draw: Callable[[pl.DataFrame, str], alt.TopLevelMixin]
    needs_hta: bool = False
    caption: str = ""  # appended to the chart title
    extra_deps: tuple[AssetsDefinition, ...] = ()  # analysis assets the view reads besides the facts
    when_empty: str = ""  # set: a model without rows is expected (why), the chart is skipped instead of failing
    all_corpora: bool = False  # draw the rows of every one of `corpora` with rows (one panel or bar per corpus)

    def rows(self, conn: duckdb.DuckDBPyConnection, model_id: str) -> tuple[str, pl.DataFrame] | None:
        """The view rows drawn for a model: those of the first of `corpora` with rows (of all
        of them with `all_corpora`), or None."""
        rows = partition_rows(conn, self.view, model_id)
        if self.all_corpora:
            found = [name for name in self.corpora if name in set(rows["corpus"])]
            return (", ".join(found), rows.filter(pl.col("corpus").is_in(found))) if found else None
        corpus = next((name for name in self.corpora if name in set(rows["corpus"])), None)
        return None if corpus is None else (corpus, rows.filter(pl.col("corpus") == corpus))

    def title(self, rows: pl.DataFrame, corpus: str) -> str:
        return f"{rows['model'][0]} on {corpus}" + (f": {self.caption}" if self.caption else "")


CHARTS = (
    ChartSpec(
        "clark_fig2_special_tokens",
        "Clark et al. Fig. 2",
        "clark_special_tokens",
        ("wiki_segments", "demo"),
        charts.clark_special_tokens_chart,
    ),
    ChartSpec(
        "clark_fig6_head_mds",
        "Clark et al. Fig. 6",
        "clark_head_mds",
        ("wiki_segments",),
        charts.clark_head_mds_chart,
        extra_deps=(head_mds,),
        when_empty="materialize wiki_segments_attention_facts (head distances) and head_mds first",
    ),
    ChartSpec(
        "clark_fig4_entropy",
        "Clark et al. Fig. 4",
        "clark_entropy",
        ("wiki_segments", "demo"),
        charts.clark_entropy_chart,
    ),
    ChartSpec(
        "clark_table1_dependency_heads",
        "Clark et al. Table 1",
        "clark_dependency_heads",
        ("ud_ewt_test", "ud_ewt_dev"),
        charts.clark_dependency_chart,
        when_empty="materialize ud_ewt_test_examples and ud_ewt_test_attention_facts (relation hits) first",
    ),
    ChartSpec(
        "clark_fig3_grad_importance",
        "Clark et al. Fig. 3",
        "clark_grad_importance",
        ("wiki_segments", "demo"),
        charts.clark_grad_importance_chart,
        extra_deps=(grad_importance,),
        when_empty="a model without a masked-LM or classification head has no gradient rows (see grad_importance's `reason`)",
    ),
    ChartSpec(
        "pascual_fig2_attention_histograms",
        "Pascual et al. Fig. 2",
        "pascual_attention_histograms",
        ("xnli_en", "demo"),
        charts.pascual_histograms_chart,
    ),
    ChartSpec(
        "pascual_fig4_center_of_mass",
        "Pascual et al. Fig. 4/5",
        "pascual_center_of_mass",
        ("xnli_en", "demo"),
        charts.pascual_center_of_mass_chart,
    ),
    ChartSpec(
        "pascual_fig1_local_correlation",
        "Pascual et al. Fig. 1",
        "pascual_hta_local_correlation",
        ("xnli_en", "demo"),
        charts.pascual_correlation_chart,
        needs_hta=True,
        caption="attention vs previous-layer contribution",
    ),
    ChartSpec(
        "pascual_fig3_contribution_histograms",
        "Pascual et al. Fig. 3",
        "pascual_contribution_histograms",
        ("xnli_en", "demo"),
        charts.pascual_histograms_chart,
        needs_hta=True,
    ),
    ChartSpec(
        "pascual_fig6_global_correlation",
        "Pascual et al. Fig. 6",
        "pascual_hta_global_correlation",
        ("xnli_en", "demo"),
        charts.pascual_correlation_chart,
        needs_hta=True,
        caption="attention vs input contribution",
    ),
    ChartSpec(
        "kovaleva_fig8_head_ablation",
        "Kovaleva et al. Fig. 8",
        "kovaleva_head_ablation",
        tuple(f"glue_{task}" for task in FINETUNE_TASKS),
        charts.kovaleva_head_ablation_chart,
        extra_deps=tuple(ablation_assets_by_task.values()),
        when_empty="materialize finetuned_<task> and <task>_ablation for a GLUE task first",
    ),
    ChartSpec(
        "kovaleva_fig9_layer_ablation",
        "Kovaleva et al. Fig. 9",
        "kovaleva_layer_ablation",
        tuple(f"glue_{task}" for task in FINETUNE_TASKS),
        charts.kovaleva_layer_ablation_chart,
        extra_deps=tuple(ablation_assets_by_task.values()),
        when_empty="materialize finetuned_<task> and <task>_ablation for a GLUE task first",
    ),
    ChartSpec(
        "clark_table2_coreference",
        "Clark et al. Table 2",
        "clark_coreference_heads",
        ("ontogum",),
        charts.clark_coreference_chart,
        extra_deps=(coreference_baselines,),
        when_empty="materialize ontogum_examples, ontogum_attention_facts (relation hits) and coreference_baselines first",
    ),
    ChartSpec(
        "clark_table3_probes",
        "Clark et al. Table 3",
        "clark_probe_uas",
        ("ud_ewt_test",),
        charts.clark_probe_chart,
        extra_deps=(dependency_probes,),
        when_empty="the probes run only once ud_ewt_dev and ud_ewt_test are materialized (asset dependency_probes)",
    ),
)

_GLUE = tuple(f"glue_{task}" for task in GLUE_TASKS)
CHARTS += (
    ChartSpec(
        "kovaleva_fig2_pattern_shares",
        "Kovaleva et al. Fig. 2",
        "kovaleva_pattern_shares",
        (*_GLUE, "demo"),
        charts.kovaleva_pattern_shares_chart,
        all_corpora=True,
    ),
    ChartSpec(
        "kovaleva_fig2_pattern_examples",
        "Kovaleva et al. Fig. 2 (maps)",
        "kovaleva_pattern_example_maps",
        (*_GLUE, "demo"),
        charts.kovaleva_pattern_examples_chart,
    ),
    ChartSpec(
        "kovaleva_fig3_framenet_heads",
        "Kovaleva et al. Fig. 3",
        "kovaleva_framenet_heads",
        ("framenet",),
        charts.kovaleva_framenet_chart,
        when_empty="materialize framenet_examples and framenet_attention_facts first",
    ),
    ChartSpec(
        "kovaleva_fig5_finetune_similarity",
        "Kovaleva et al. Fig. 5",
        "kovaleva_finetune_similarity",
        _GLUE,
        charts.kovaleva_finetune_similarity_chart,
        all_corpora=True,
        extra_deps=tuple(similarity_assets),
        when_empty="materialize finetuned_<task>, then glue_<task>_finetune_similarity for the base model",
    ),
    ChartSpec(
        "kovaleva_fig6_feature_attention",
        "Kovaleva et al. Fig. 6",
        "kovaleva_feature_attention",
        (*_GLUE, "demo"),
        charts.kovaleva_feature_attention_chart,
    ),
    ChartSpec(
        "kovaleva_fig7_cls_attention",
        "Kovaleva et al. Fig. 7",
        "kovaleva_cls_attention",
        (*_GLUE, "demo"),
        charts.kovaleva_cls_attention_chart,
    ),
)


def build_chart_asset(spec: ChartSpec) -> AssetsDefinition:
    @asset(
        name=spec.name,
        description=f"{spec.figure}, from the `{spec.view}` view (corpus: first of {', '.join(spec.corpora)} with rows).",
        partitions_def=model_partitions,
        deps=[warehouse_views, *(hta_assets if spec.needs_hta else fact_assets), *spec.extra_deps],
        group_name="charts",
    )
    def chart_asset(
        context: AssetExecutionContext, warehouse: DuckDBResource, chart_folder: ChartFolder
    ) -> MaterializeResult:
        model_id = context.partition_key
        with warehouse.get_connection() as conn:
            found = spec.rows(conn, model_id)
        if found is None and spec.when_empty:
            context.log.warning(
                f"{spec.name}: view {spec.view} has no rows for model '{model_id}' on {spec.corpora}; skipped: {spec.when_empty}"
            )
            return MaterializeResult(metadata={"skipped": spec.when_empty, "view": spec.view, "view_rows": 0})
        if found is None:
            raise ValueError(
                f"View {spec.view} has no rows for model '{model_id}' on {spec.corpora}: "
                "materialize the corpus and attention-fact assets first."
            )
        corpus, rows = found
        html, png = charts.save_chart(
            spec.draw(rows, spec.title(rows, corpus)), chart_folder.for_model(model_id), spec.name
        )
        context.log.info(f"Wrote {html} and {png}")
        encoded = base64.b64encode(png.read_bytes()).decode()
        return MaterializeResult(
            metadata={
                "chart": MetadataValue.md(f"![{spec.figure}](data:image/png;base64,{encoded})"),
                "html": MetadataValue.path(str(html)),
                "png": MetadataValue.path(str(png)),
                "corpus": corpus,
                "view": spec.view,
                "view_rows": rows.height,
            }
        )

    return chart_asset


chart_assets_by_name = {spec.name: build_chart_asset(spec) for spec in CHARTS}
chart_assets = list(chart_assets_by_name.values())
hta_chart_assets = [chart_assets_by_name[spec.name] for spec in CHARTS if spec.needs_hta]
