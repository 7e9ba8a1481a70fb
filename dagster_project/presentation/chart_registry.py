"""The chart registry: every paper figure the project draws, from which view, for which
corpora and analysis. The chart assets, the analyses' chart targets and the report are derived
from it."""

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import altair as alt
import duckdb
import polars as pl

from dagster_project.compute.kovaleva.tasks import FINETUNE_TASKS
from dagster_project.corpora import CORPORA, GLUE_TASKS
from dagster_project.presentation.charts import clark, compare, kovaleva, pascual
from dagster_project.presentation.charts.common import short_model_name
from dagster_project.storage.batches import partition_rows

# Corpora with gold coreference mentions: Table 2 is drawn for each one with rows.
COREFERENCE_CORPORA = tuple(name for name, spec in CORPORA.items() if "coref_mentions" in spec.annotations)
XNLI_CORPORA = ("xnli_en", "xnli_de", "xnli_ar")  # Pascual Fig. 4: English, German and Arabic side by side
PAPER_AUTHORS = {
    "clark": "Clark et al.",
    "kovaleva": "Kovaleva et al.",
    "pascual": "Pascual et al.",
    "compare": "Models compared:",  # not a paper: every registered model overlaid
}
ANALYSES = ("attention", "hta", "clark", "finetuning")

# What a chart's result needs of the model, beyond having been run (ChartSpec.needs). The report
# says so, instead of a command to run, for a model it can tell lacks one.
LOSS_HEAD = "loss_head"
PRETRAINED = "pretrained"
ATTENTION_LAYOUT = "attention_layout"
SECOND_MODEL = "second_model"
NEEDS = {
    LOSS_HEAD: "a model with a masked-LM or classification head (its training loss is what the gradients are of)",
    PRETRAINED: "a pre-trained model: fine-tuning starts from it, and a fine-tuned checkpoint is not fine-tuned again",
    ATTENTION_LAYOUT: "a model family whose attention layout is declared (compute/attention_layouts.py): HTA hooks "
    "its query, key and value projections",
    SECOND_MODEL: "a second registered model to match heads with",
}


@dataclass(frozen=True)
class Minimum:
    """The fewest examples a chart's numbers should come from, and why; the report warns below it."""

    examples: int
    reason: str


# Per-head and per-layer means (and their bootstrap intervals) over fewer examples move with a
# handful of sentences; Pascual Fig. 4 per language on a vocabulary that splits the script into
# many pieces is the usual case.
MEANS = Minimum(100, "a per-head or per-layer mean over fewer examples moves with a handful of sentences")
# A GLUE score or an ablation's change of score over fewer validation examples moves by points
# with a few predictions.
SCORES = Minimum(200, "a task score over fewer validation examples moves by points with a few predictions")
# Maps of single examples are not estimates.
EXAMPLE_MAPS = Minimum(0, "the maps are single examples")


@dataclass(frozen=True)
class ChartSpec:
    name: str
    paper: str  # a key of PAPER_AUTHORS
    figure: str  # as the paper numbers it: "Fig. 2", "Table 1"
    view: str
    corpora: tuple[str, ...]  # first one with rows for the model is drawn
    draw: Callable[[pl.DataFrame, str], alt.TopLevelMixin]
    analysis: str = "attention"  # the analysis (of ANALYSES) whose run draws it
    caption: str = ""  # appended to the chart title
    reads: tuple[str, ...] = ()  # analysis tables the view reads besides the attention/HTA facts
    when_empty: str = ""  # set: a model without rows is expected (why), the chart is skipped instead of failing
    all_corpora: bool = False  # draw the rows of every one of `corpora` with rows (one panel or bar per corpus)
    # also draw the rows of the models fine-tuned from this one (the view's base_model_id), so
    # each task shows the pre-trained and the fine-tuned model side by side
    side_by_side: bool = False
    all_models: bool = False  # also draw every other model's rows (the model's own first), to compare models
    # with all_models: draw every corpus of the view once the model has rows on one, not only the
    # corpora it has rows on (Pascual Fig. 4: each language drawn by its own model); the model's
    # own rows come first, so the draw orders the panels itself
    every_corpus: bool = False
    needs: tuple[str, ...] = ()  # keys of NEEDS: what the result needs of the model
    minimum: Minimum = MEANS
    # where the view has no n_examples column: the tables whose examples the result is computed
    # from, counted per (model, corpus); the smallest count with rows is the n
    counted_from: tuple[str, ...] = ("examples",)

    @property
    def label(self) -> str:
        """The figure with its paper: "Clark et al. Fig. 2"."""
        return f"{PAPER_AUTHORS[self.paper]} {self.figure}"

    def rows(self, conn: duckdb.DuckDBPyConnection, model_id: str) -> tuple[str, pl.DataFrame] | None:
        """The view rows drawn for a model (and, `side_by_side`, for the models fine-tuned from
        it, or, `all_models`, for every model; the model's own rows first): those of the first of
        `corpora` with rows (of all of them with `all_corpora`, in the order of `corpora`), or None."""
        if self.side_by_side or self.all_models:
            own = duckdb.ColumnExpression("model_id") == duckdb.ConstantExpression(model_id)
            tuned = duckdb.ColumnExpression("base_model_id") == duckdb.ConstantExpression(model_id)
            rows = conn.table(self.view) if self.all_models else conn.table(self.view).filter(own | tuned)
            rows = rows.pl().sort(pl.col("model_id") != model_id, maintain_order=True)
            own_corpora = set(rows.filter(pl.col("model_id") == model_id)["corpus"])
            if self.all_models and not (self.every_corpus and own_corpora):
                # drawn only where the model itself has rows on a corpus (every_corpus: on any one)
                rows = rows.filter(pl.col("corpus").is_in(own_corpora))
        else:
            rows = partition_rows(conn, self.view, model_id)
        # DuckDB sums of integers are HUGEINT, which reach polars as Decimal; Vega-Lite's JSON has no decimals.
        rows = rows.with_columns(pl.col(pl.Decimal).cast(pl.Float64))
        if self.all_corpora:
            found = [name for name in self.corpora if name in set(rows["corpus"])]
            order = pl.col("corpus").replace_strict({name: index for index, name in enumerate(found)}, default=None)
            rows = rows.filter(pl.col("corpus").is_in(found)).sort(order, maintain_order=True)
            if self.every_corpus:  # the model's own rows first, wherever they are: the title names it
                rows = rows.sort(pl.col("model_id") != model_id, maintain_order=True)
            return (", ".join(found), rows) if found else None
        corpus = next((name for name in self.corpora if name in set(rows["corpus"])), None)
        return None if corpus is None else (corpus, rows.filter(pl.col("corpus") == corpus))

    def title(self, rows: pl.DataFrame, corpus: str) -> str:
        """The model's short name (short_model_name) and the corpus; the source is in `source`."""
        return f"{short_model_name(rows['model'][0])} on {corpus}" + (f": {self.caption}" if self.caption else "")

    def source(self, rows: pl.DataFrame) -> str:
        """The model the chart is drawn for, as registered (hub id or local path), for captions."""
        return rows["model"][0]


CHARTS = (
    ChartSpec(
        "clark_fig1_head_maps",
        "clark",
        "Fig. 1",
        "clark_head_example_maps",
        ("wiki_segments", "ud_ewt_test", "ontogum"),
        clark.clark_fig1_head_maps_chart,
        when_empty="whole maps are kept for wiki_segments, ud_ewt_test and ontogum only: materialize "
        "wiki_segments_attention_facts first",
        minimum=EXAMPLE_MAPS,
    ),
    ChartSpec(
        "clark_fig5_head_maps",
        "clark",
        "Fig. 5",
        "clark_head_example_maps",
        ("ud_ewt_test", "ontogum"),
        clark.clark_fig5_head_maps_chart,
        all_corpora=True,  # the dependency heads from ud_ewt_test, the coreference head from ontogum
        when_empty="materialize ud_ewt_test_attention_facts (dependency heads) or ontogum_attention_facts "
        "(coreference head) first",
        minimum=EXAMPLE_MAPS,
    ),
    ChartSpec(
        "clark_fig2_special_tokens",
        "clark",
        "Fig. 2",
        "clark_special_tokens",
        ("wiki_segments", "demo"),
        clark.clark_special_tokens_chart,
    ),
    ChartSpec(
        "clark_fig6_head_mds",
        "clark",
        "Fig. 6",
        "clark_head_mds",
        ("wiki_segments",),
        clark.clark_head_mds_chart,
        analysis="clark",
        reads=("head_mds",),
        when_empty="materialize wiki_segments_attention_facts (head distances) and head_mds first",
    ),
    ChartSpec(
        "clark_fig6_head_distances",
        "clark",
        "Fig. 6",
        "clark_head_distances",
        ("wiki_segments",),
        clark.clark_head_distances_chart,
        when_empty="materialize wiki_segments_attention_facts (head distances) first",
    ),
    ChartSpec(
        "clark_fig4_entropy",
        "clark",
        "Fig. 4",
        "clark_entropy",
        ("wiki_segments", "demo"),
        clark.clark_entropy_chart,
    ),
    ChartSpec(
        "clark_table1_dependency_heads",
        "clark",
        "Table 1",
        "clark_dependency_heads",
        ("ud_ewt_test", "ud_ewt_dev"),
        clark.clark_dependency_chart,
        when_empty="materialize ud_ewt_test_examples and ud_ewt_test_attention_facts (relation hits) first",
    ),
    ChartSpec(
        "clark_fig3_grad_importance",
        "clark",
        "Fig. 3",
        "clark_grad_importance",
        ("wiki_segments", "demo"),
        clark.clark_grad_importance_chart,
        analysis="clark",
        reads=("grad_importance",),
        when_empty=(
            "a model without a masked-LM or classification head has no gradient rows (see grad_importance's `reason`)"
        ),
        needs=(LOSS_HEAD,),
    ),
    ChartSpec(
        "pascual_fig2_attention_histograms",
        "pascual",
        "Fig. 2",
        "pascual_attention_histograms",
        ("xnli_en", "demo"),
        pascual.pascual_histograms_chart,
        counted_from=("position_histograms",),
    ),
    ChartSpec(
        "pascual_fig4_center_of_mass",
        "pascual",
        "Fig. 4/5",
        "pascual_center_of_mass",
        (*XNLI_CORPORA, "demo"),
        pascual.pascual_center_of_mass_chart,
        all_corpora=True,
        counted_from=("position_histograms", "contribution_histograms"),
    ),
    ChartSpec(
        "pascual_fig4_center_of_mass_models",
        "pascual",
        "Fig. 4",
        "pascual_center_of_mass",
        (*XNLI_CORPORA, "demo"),
        pascual.pascual_center_of_mass_models_chart,
        all_corpora=True,
        all_models=True,
        counted_from=("position_histograms", "contribution_histograms"),
    ),
    ChartSpec(
        "pascual_fig4_center_of_mass_languages",
        "pascual",
        "Fig. 4",
        "pascual_language_center_of_mass",
        XNLI_CORPORA,
        pascual.pascual_language_center_of_mass_chart,
        all_corpora=True,
        all_models=True,
        every_corpus=True,
        when_empty="the model draws no XNLI line: every language it was run on has its own model (models.toml "
        "`language`), whose chart draws the figure, or it has no xnli_<language> attention facts",
        counted_from=("position_histograms", "contribution_histograms"),
    ),
    ChartSpec(
        "pascual_fig1_local_correlation",
        "pascual",
        "Fig. 1",
        "pascual_hta_local_correlation",
        ("xnli_en", "demo"),
        partial(pascual.pascual_correlation_chart, marks="pascual_fig1_local_correlation"),
        analysis="hta",
        caption="attention vs previous-layer contribution",
        needs=(ATTENTION_LAYOUT,),
    ),
    ChartSpec(
        "pascual_fig3_contribution_histograms",
        "pascual",
        "Fig. 3",
        "pascual_contribution_histograms",
        ("xnli_en", "demo"),
        pascual.pascual_histograms_chart,
        analysis="hta",
        needs=(ATTENTION_LAYOUT,),
        counted_from=("contribution_histograms",),
    ),
    ChartSpec(
        "pascual_fig7_hta_pattern_maps",
        "pascual",
        "Fig. 7",
        "pascual_hta_pattern_maps",
        ("xnli_en", "demo"),
        pascual.pascual_hta_pattern_maps_chart,
        analysis="hta",
        when_empty=(
            "materialize <corpus>_hta and <corpus>_attention_facts (their head summaries pick each class's head) first"
        ),
        needs=(ATTENTION_LAYOUT,),
        minimum=EXAMPLE_MAPS,
    ),
    ChartSpec(
        "pascual_appc_hta_example_maps",
        "pascual",
        "App. C",
        "pascual_hta_example_maps",
        ("xnli_en", "demo"),
        pascual.pascual_hta_all_heads_chart,
        analysis="hta",
        caption=f"every head's maps on the shortest example of Fig. 7, its first {pascual.APPENDIX_C_TOKENS} tokens",
        when_empty=(
            "materialize <corpus>_hta and <corpus>_attention_facts (their head summaries pick each class's head) first"
        ),
        needs=(ATTENTION_LAYOUT,),
        minimum=EXAMPLE_MAPS,
    ),
    ChartSpec(
        "pascual_fig6_global_correlation",
        "pascual",
        "Fig. 6",
        "pascual_hta_global_correlation",
        ("xnli_en", "demo"),
        partial(pascual.pascual_correlation_chart, marks="pascual_fig6_global_correlation"),
        analysis="hta",
        caption="attention vs input contribution",
        needs=(ATTENTION_LAYOUT,),
    ),
    ChartSpec(
        "kovaleva_table1_task_scores",
        "kovaleva",
        "Table 1",
        "kovaleva_task_scores",
        tuple(f"glue_{task}" for task in FINETUNE_TASKS),
        kovaleva.kovaleva_task_scores_chart,
        analysis="finetuning",
        reads=("task_scores",),
        all_corpora=True,
        when_empty="materialize finetuned_<task> for a GLUE task first",
        needs=(PRETRAINED,),
        minimum=SCORES,
    ),
    ChartSpec(
        "kovaleva_fig8_head_ablation",
        "kovaleva",
        "Fig. 8",
        "kovaleva_head_ablation",
        tuple(f"glue_{task}" for task in FINETUNE_TASKS),
        kovaleva.kovaleva_head_ablation_chart,
        analysis="finetuning",
        reads=("ablation_scores",),
        when_empty="materialize finetuned_<task> and <task>_ablation for a GLUE task first",
        needs=(PRETRAINED,),
        minimum=SCORES,
    ),
    ChartSpec(
        "kovaleva_sec5_framenet_ablation",
        "kovaleva",
        "§5",
        "kovaleva_framenet_head_ablation",
        tuple(f"glue_{task}" for task in FINETUNE_TASKS),
        kovaleva.kovaleva_framenet_ablation_chart,
        analysis="finetuning",
        reads=("ablation_scores",),
        all_corpora=True,
        when_empty="materialize framenet_attention_facts, finetuned_<task> and <task>_ablation first",
        needs=(PRETRAINED,),
        minimum=SCORES,
    ),
    ChartSpec(
        "kovaleva_fig9_layer_ablation",
        "kovaleva",
        "Fig. 9",
        "kovaleva_layer_ablation",
        tuple(f"glue_{task}" for task in FINETUNE_TASKS),
        kovaleva.kovaleva_layer_ablation_chart,
        analysis="finetuning",
        reads=("ablation_scores",),
        when_empty="materialize finetuned_<task> and <task>_ablation for a GLUE task first",
        needs=(PRETRAINED,),
        minimum=SCORES,
    ),
    ChartSpec(
        "clark_table2_coreference",
        "clark",
        "Table 2",
        "clark_coreference_heads",
        COREFERENCE_CORPORA,
        clark.clark_coreference_chart,
        analysis="clark",
        reads=("coref_baseline_predictions",),
        when_empty=(
            "materialize <corpus>_examples, <corpus>_attention_facts (relation hits) and "
            "<corpus>_coreference_baselines for a coreference corpus (ontogum, conll2012, gap_*) first"
        ),
        all_corpora=True,
    ),
    ChartSpec(
        "clark_table3_probes",
        "clark",
        "Table 3",
        "clark_probe_uas",
        ("ud_ewt_test",),
        clark.clark_probe_chart,
        analysis="clark",
        reads=("probe_scores",),
        when_empty="the probes run only once ud_ewt_dev and ud_ewt_test are materialized (asset dependency_probes)",
    ),
)

_GLUE = tuple(f"glue_{task}" for task in GLUE_TASKS)
# Kovaleva's tasks in the paper's order (QQP and MNLI are not staged), then the other GLUE
# corpora (CoLA, WNLI: not in the paper) and the demo.
KOVALEVA_PAPER_TASKS = ("mrpc", "stsb", "sst2", "rte", "qnli")
_KOVALEVA_GLUE = (
    *(f"glue_{task}" for task in KOVALEVA_PAPER_TASKS),
    *(name for name in _GLUE if name.removeprefix("glue_") not in KOVALEVA_PAPER_TASKS),
)
_KOVALEVA_CORPORA = (*_KOVALEVA_GLUE, "demo")
CHARTS += (
    ChartSpec(
        "kovaleva_fig1_pattern_examples",
        "kovaleva",
        "Fig. 1",
        "kovaleva_pattern_example_maps",
        _KOVALEVA_CORPORA,
        kovaleva.kovaleva_pattern_examples_chart,
        minimum=EXAMPLE_MAPS,
    ),
    ChartSpec(
        "kovaleva_fig2_pattern_shares",
        "kovaleva",
        "Fig. 2",
        "kovaleva_pattern_shares",
        _KOVALEVA_CORPORA,
        kovaleva.kovaleva_pattern_shares_chart,
        all_corpora=True,
        side_by_side=True,
    ),
    ChartSpec(
        "kovaleva_fig3_framenet_heads",
        "kovaleva",
        "Fig. 3",
        "kovaleva_framenet_heads",
        ("framenet",),
        kovaleva.kovaleva_framenet_chart,
        when_empty="materialize framenet_examples and framenet_attention_facts first",
    ),
    ChartSpec(
        "kovaleva_fig5_finetune_similarity",
        "kovaleva",
        "Fig. 5",
        "kovaleva_finetune_similarity",
        _KOVALEVA_GLUE,
        kovaleva.kovaleva_finetune_similarity_chart,
        all_corpora=True,
        analysis="finetuning",
        reads=("finetune_cosines",),
        when_empty="materialize finetuned_<task>, then glue_<task>_finetune_similarity for the base model",
        needs=(PRETRAINED,),
        counted_from=("finetune_cosines",),
    ),
    ChartSpec(
        "kovaleva_fig6_special_tokens",
        "kovaleva",
        "Fig. 6",
        "kovaleva_feature_attention",
        _KOVALEVA_CORPORA,
        kovaleva.kovaleva_special_tokens_chart,
        all_corpora=True,
        side_by_side=True,
    ),
    ChartSpec(
        "kovaleva_sec44_feature_attention",
        "kovaleva",
        "§4.4-4.5",
        "kovaleva_feature_attention",
        _KOVALEVA_CORPORA,
        kovaleva.kovaleva_feature_attention_chart,
    ),
    ChartSpec(
        "kovaleva_fig7_cls_attention",
        "kovaleva",
        "Fig. 7",
        "kovaleva_cls_attention",
        _KOVALEVA_CORPORA,
        kovaleva.kovaleva_cls_attention_chart,
        all_corpora=True,
        side_by_side=True,
    ),
)

# The compare page: every per-layer result of every registered model overlaid on
# relative depth, the partition's model first. Corpora: the paper corpora, then the GLUE tasks,
# where the checkpoints the pipeline fine-tunes are analysed beside their base model.
_COMPARE_CORPORA = ("wiki_segments", "xnli_en", "demo", *_KOVALEVA_GLUE)
_COMPARE_EMPTY = "no model has rows in the view on these corpora yet"


def _depth_curves(
    name: str,
    view: str,
    values: tuple[str, ...],
    label: str,
    series: str | None = None,
    corpora: tuple[str, ...] = _COMPARE_CORPORA,
    **options,
) -> ChartSpec:
    return ChartSpec(
        name,
        "compare",
        label,
        view,
        corpora,
        partial(compare.depth_curves_chart, values=values, label=label, series=series),
        when_empty=options.pop("when_empty", _COMPARE_EMPTY),
        all_corpora=True,
        all_models=True,
        **options,
    )


# The weightings of the maps side by side (docs/methods.md §3.9), from a facts run whose config
# `weightings` names more than attention.
_WEIGHTINGS_EMPTY = (
    "run the corpus's attention facts with run config weightings: [attention, norm, rollout] "
    "(attn-warehouse run --set <corpus>_attention_facts.weightings='[attention,norm,rollout]')"
)

CHARTS += (
    ChartSpec(
        "compare_weightings_special_tokens",
        "compare",
        "attention and its weightings: special tokens",
        "compare_weightings_special_tokens",
        ("wiki_segments", "ud_ewt_test", "demo"),
        partial(
            compare.weightings_by_layer_chart,
            values=("to_cls", "to_sep", "to_cls_sep", "to_punct"),
            label="mean share of each row's mass",
        ),
        when_empty=_WEIGHTINGS_EMPTY,
    ),
    ChartSpec(
        "compare_weightings_dependency_heads",
        "compare",
        "attention and its weightings: dependency heads",
        "compare_weightings_dependency_heads",
        ("ud_ewt_test",),
        compare.weightings_dependency_chart,
        when_empty=_WEIGHTINGS_EMPTY,
    ),
    ChartSpec(
        "compare_weightings_faithfulness",
        "compare",
        "weightings' faithfulness to the gradients",
        "compare_weightings_faithfulness",
        tuple(f"glue_{task}" for task in FINETUNE_TASKS),
        compare.weightings_faithfulness_chart,
        # drawn in a classifier's own run, as a checkpoint fine-tuned on SST-2 gets (attention on glue_sst2)
        analysis="attention",
        reads=("saliency_correlations",),
        counted_from=("saliency_correlations",),
        when_empty="a classifier's partition has rows: run a model fine-tuned on SST-2 on glue_sst2 (`attn-warehouse "
        "run --corpus glue_sst2 --analysis finetuning` runs its checkpoint after fine-tuning)",
    ),
    ChartSpec(
        "compare_weightings_hta_agreement",
        "compare",
        "weightings' agreement with HTA",
        "compare_weightings_hta_agreement",
        ("xnli_en", "demo"),
        compare.weightings_hta_agreement_chart,
        analysis="hta",
        when_empty="materialize <corpus>_hta_facts again: an HTA run before the agreement was computed wrote none",
        needs=(ATTENTION_LAYOUT,),
    ),
    ChartSpec(
        "compare_weightings_value_norms",
        "compare",
        "value-vector norms",
        "compare_weightings_value_norms",
        ("wiki_segments", "ud_ewt_test"),  # only a run that asks for the norm weighting writes value norms
        compare.value_norms_chart,
        when_empty=_WEIGHTINGS_EMPTY,
    ),
)

CHARTS += (
    ChartSpec(
        "compare_head_matches",
        "compare",
        "head correspondence",
        "compare_head_matches",
        ("wiki_segments", "xnli_en", "demo", *_KOVALEVA_GLUE, "ud_ewt_test", "framenet"),
        compare.compare_head_matches_chart,
        reads=("head_matches",),
        when_empty="register a second model and materialize <corpus>_head_matches for a corpus both models have",
        needs=(SECOND_MODEL,),
    ),
    _depth_curves(
        "compare_special_tokens",
        "clark_special_tokens",
        ("to_cls", "to_sep", "to_punct"),
        "attention to special tokens",
    ),
    _depth_curves("compare_entropy", "clark_entropy", ("entropy",), "attention entropy (nats)"),
    _depth_curves(
        "compare_relative_position",
        "clark_relative_position",
        ("to_prev", "to_self", "to_next"),
        "attention by position",
    ),
    _depth_curves(
        "compare_center_of_mass",
        "pascual_center_of_mass",
        ("center_of_mass",),
        "center of mass (tokens)",
        series="kind",
        corpora=(*XNLI_CORPORA, "demo"),
        counted_from=("position_histograms", "contribution_histograms"),
    ),
    _depth_curves(
        "compare_framenet_heads",
        "kovaleva_framenet_heads",
        ("mean_max_attention",),
        "FrameNet link attention",
        corpora=("framenet",),
    ),
    _depth_curves(
        "compare_feature_attention",
        "kovaleva_feature_attention",
        ("score",),
        "attention received by feature",
        series="feature",
    ),
    _depth_curves(
        "compare_grad_importance",
        "clark_grad_importance",
        ("grad_magnitude",),
        "gradient magnitude",
        series="target_type",
        analysis="clark",
        reads=("grad_importance",),
        needs=(LOSS_HEAD,),
    ),
    _depth_curves(
        "compare_hta_local_correlation",
        "pascual_hta_local_correlation",
        ("pearson",),
        "attention vs previous-layer contribution (Pearson)",
        corpora=(*XNLI_CORPORA, "demo"),
        analysis="hta",
        needs=(ATTENTION_LAYOUT,),
    ),
    _depth_curves(
        "compare_hta_global_correlation",
        "pascual_hta_global_correlation",
        ("pearson",),
        "attention vs input contribution (Pearson)",
        corpora=(*XNLI_CORPORA, "demo"),
        analysis="hta",
        needs=(ATTENTION_LAYOUT,),
    ),
    _depth_curves(
        "compare_finetune_similarity",
        "kovaleva_finetune_similarity",
        ("cosine",),
        "pre-trained vs fine-tuned cosine",
        corpora=_KOVALEVA_GLUE,
        analysis="finetuning",
        reads=("finetune_cosines",),
        needs=(PRETRAINED,),
        counted_from=("finetune_cosines",),
    ),
    _depth_curves(
        "compare_layer_ablation",
        "kovaleva_layer_ablation",
        ("delta_vs_baseline",),
        "score change with the layer disabled (points)",
        series="metric",
        corpora=tuple(f"glue_{task}" for task in FINETUNE_TASKS),
        analysis="finetuning",
        reads=("ablation_scores",),
        needs=(PRETRAINED,),
        minimum=SCORES,
    ),
)
