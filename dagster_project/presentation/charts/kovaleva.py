"""Charts of Kovaleva et al. 2019: pattern classes, FrameNet heads, fine-tuning similarity, features, ablations."""

import altair as alt
import polars as pl

from dagster_project.presentation.charts.common import (
    PATTERN_ORDER,
    head_heatmap,
    in_order,
    layer_paper_marks,
    map_cells,
)
from dagster_project.presentation.paper_marks import paper_marks


def _primary_metric(rows: pl.DataFrame) -> pl.DataFrame:
    """Rows of the task's headline metric: accuracy, else Pearson (STS-B)."""
    metric = "accuracy" if "accuracy" in set(rows["metric"]) else "pearson"
    return rows.filter(pl.col("metric") == metric)


def kovaleva_head_ablation_chart(rows: pl.DataFrame, title: str) -> alt.LayerChart:
    """Kovaleva Fig. 8: score with one head disabled (layer x head), change vs the baseline."""
    rows = _primary_metric(rows)
    metric, baseline = rows["metric"][0], rows["baseline_score"][0]
    limit = max(float(rows["delta_vs_baseline"].abs().max()), 1e-9)
    cells = alt.Chart(rows).encode(x=alt.X("head:O", title="head"), y=alt.Y("layer:O", title="layer"))
    heat = cells.mark_rect().encode(
        color=alt.Color(
            "delta_vs_baseline:Q",
            title="Δ vs baseline (points)",
            scale=alt.Scale(scheme="redblue", domain=[-limit, limit]),
        ),
        tooltip=[
            "layer",
            "head",
            alt.Tooltip("score:Q", format=".1f"),
            alt.Tooltip("delta_vs_baseline:Q", format="+.2f"),
            alt.Tooltip("to_sep:Q", format=".2f"),
            alt.Tooltip("entropy:Q", format=".2f"),
        ],
    )
    labels = cells.mark_text(fontSize=8).encode(text=alt.Text("score:Q", format=".1f"))
    # beside the map, every head's change on one axis, with the paper's best gains (STS-B, MRPC)
    x = alt.X("delta_vs_baseline:Q", title="Δ vs baseline (points) per head")
    changes = (
        alt.Chart(rows)
        .mark_tick(thickness=1.5, opacity=0.7, color="#4c78a8")
        .encode(x=x, tooltip=["layer", "head", alt.Tooltip("delta_vs_baseline:Q", format="+.2f")])
    )
    zero = alt.Chart(rows.head(1)).mark_rule(color="black").encode(x=alt.datum(0))
    strip = layer_paper_marks([changes, zero], paper_marks("kovaleva_fig8_head_ablation", "changes")).properties(
        width=300, height=90, title="every head's change"
    )
    return alt.hconcat(alt.layer(heat, labels).properties(width=420, height=260), strip).properties(
        title=f"{title}: {metric} with one head disabled (baseline {baseline:.1f})"
    )


def kovaleva_layer_ablation_chart(rows: pl.DataFrame, title: str) -> alt.LayerChart:
    """Kovaleva Fig. 9: score with every head of one layer disabled, and the baseline."""
    rows = _primary_metric(rows)
    metric = rows["metric"][0]
    bars = (
        alt.Chart(rows)
        .mark_bar()
        .encode(
            x=alt.X("layer:O", title="disabled layer"),
            y=alt.Y("score:Q", title=f"{metric} (%)", scale=alt.Scale(zero=False)),
            tooltip=["layer", alt.Tooltip("score:Q", format=".1f"), alt.Tooltip("delta_vs_baseline:Q", format="+.2f")],
        )
    )
    baseline = alt.Chart(rows.head(1)).mark_rule(color="orange", strokeWidth=2).encode(y="baseline_score:Q")
    return layer_paper_marks([bars, baseline], paper_marks("kovaleva_fig9_layer_ablation"), rows).properties(
        width=420, height=240, title=f"{title}: {metric} with one layer disabled (orange: the baseline)"
    )


def kovaleva_pattern_shares_chart(rows: pl.DataFrame, title: str) -> alt.FacetChart:
    """Kovaleva Fig. 2: stacked shares of the five pattern classes per task, the pre-trained
    model beside the model fine-tuned on the task where there is one. Heterogeneous is stacked at
    the bottom, so its share reads off the axis against the paper's range (shaded)."""
    bars = (
        alt.Chart()
        .mark_bar()
        .encode(
            x=alt.X("role:N", title=None, sort=in_order(rows, "role")),
            y=alt.Y(
                "share:Q",
                title="share of (example, head) maps",
                axis=alt.Axis(format="%"),
                scale=alt.Scale(domain=[0, 1]),
            ),
            color=alt.Color("pattern:N", sort=PATTERN_ORDER),
            order=alt.Order("pattern_order:Q", sort="descending"),
            tooltip=["task", "model", "pattern", alt.Tooltip("share:Q", format=".1%"), "maps"],
        )
    )
    return (
        layer_paper_marks([bars], paper_marks("kovaleva_fig2_pattern_shares"), data=rows)
        .properties(width=alt.Step(50), height=260)
        .facet(column=alt.Column("task:N", title=None, sort=in_order(rows, "task")))
        .properties(title=f"{title}: attention pattern classes")
    )


def kovaleva_pattern_examples_chart(rows: pl.DataFrame, title: str) -> alt.FacetChart:
    """Kovaleva Fig. 1: the kept example maps, one row of maps per pattern class."""
    rows = rows.with_columns(
        map=pl.format("{} L{}-H{} ex. {}", "task", "layer", "head", "example_id"),
        slot=pl.col("example_id").rank("dense").over("task", "pattern").cast(pl.Int32),
    )
    return (
        map_cells(rows, "attention", "attention", ["map"])
        .facet(row=alt.Row("pattern:N", sort=PATTERN_ORDER), column=alt.Column("slot:O", title="example"))
        .resolve_scale(x="independent", y="independent")
        .properties(title=f"{title}: example maps per pattern class")
    )


def kovaleva_framenet_chart(rows: pl.DataFrame, title: str) -> alt.LayerChart:
    """Kovaleva Fig. 3: mean max attention over FrameNet links per head; x marks the heads
    above the 99th percentile."""
    marks = (
        alt.Chart(rows.filter(pl.col("above_p99")))
        .mark_text(text="×", fontSize=16, color="#e45756")
        .encode(x="head:O", y=alt.Y("layer:O", sort="descending"))
    )
    p99 = rows["p99"][0]
    heatmap = alt.layer(head_heatmap(rows, "mean_max_attention", "mean max attention", "blues"), marks)
    # beside the map, every head's value on one axis, with the model's p99 and the paper's two heads
    x = alt.X("mean_max_attention:Q", title="mean max attention per head")
    heads = (
        alt.Chart(rows)
        .mark_tick(thickness=1.5, opacity=0.7)
        .encode(
            x=x,
            color=alt.value("#4c78a8"),
            tooltip=["layer", "head", alt.Tooltip("mean_max_attention:Q", format=".3f")],
        )
    )
    threshold = alt.Chart(rows.head(1)).mark_rule(color="black").encode(x="p99:Q")
    strip = layer_paper_marks([heads, threshold], paper_marks("kovaleva_fig3_framenet_heads", "heads")).properties(
        width=300, height=90, title="every head (black: the model's p99)"
    )
    return alt.hconcat(heatmap, strip).properties(title=f"{title}: frame-semantic links (× above p99 = {p99:.3f})")


def kovaleva_finetune_similarity_chart(rows: pl.DataFrame, title: str) -> alt.FacetChart:
    """Kovaleva Fig. 5: per-head cosine of pre-trained and fine-tuned maps, one panel per task."""
    return (
        # The scale spans the observed cosines (often all > 0.9), so small changes show.
        head_heatmap(rows, "cosine", "cosine", "greys")
        .encode(color=alt.Color("cosine:Q", scale=alt.Scale(scheme="greys", reverse=True, zero=False)))
        .facet(column=alt.Column("task:N", sort=in_order(rows, "task")))
        .properties(title=f"{title}: pre-trained vs fine-tuned attention (darker: more change)")
    )


def kovaleva_special_tokens_chart(rows: pl.DataFrame, title: str) -> alt.FacetChart:
    """Kovaleva Fig. 6: per task, the attention [SEP] (top row) and [CLS] (bottom row) receive
    in every head, the pre-trained model beside the model fine-tuned on the task."""
    rows = rows.filter(pl.col("feature").is_in(["[SEP]", "[CLS]"])).with_columns(
        panel=pl.format("{} ({})", "task", "role")
    )
    return (
        head_heatmap(rows, "score", "attention received", "viridis")
        .properties(width=alt.Step(14), height=alt.Step(14))
        .facet(
            row=alt.Row("feature:N", title=None, sort=["[SEP]", "[CLS]"]),
            column=alt.Column("panel:N", title=None, sort=in_order(rows, "panel")),
        )
        .properties(title=f"{title}: attention to [SEP] and [CLS] per task")
    )


def kovaleva_feature_attention_chart(rows: pl.DataFrame, title: str) -> alt.FacetChart:
    """Kovaleva §4.4-4.5: per head, the attention each feature type receives (and the
    token-to-token pairs); fine-tuned models show their base model's scores beside."""
    long = rows.select("feature", "layer", "head", "role", "score")
    if rows["base_score"].is_not_null().any():
        long = pl.concat(
            [long, rows.select("feature", "layer", "head", role=pl.lit("pre-trained (base)"), score="base_score")]
        )
    long = long.with_columns(panel=pl.format("{} ({})", "feature", "role"))
    return (
        head_heatmap(long, "score", "attention", "viridis")
        .properties(width=alt.Step(14), height=alt.Step(14))
        .facet(facet=alt.Facet("panel:N", title=None, sort=sorted(set(long["panel"]))), columns=4)
        .resolve_scale(color="independent")
        .properties(title=f"{title}: attention received by feature type")
    )


def kovaleva_cls_attention_chart(rows: pl.DataFrame, title: str) -> alt.FacetChart:
    """Kovaleva Fig. 7: final-layer [CLS] row's weight to each feature type, per head; one
    column per task, the pre-trained model above the model fine-tuned on the task."""
    return (
        alt.Chart(rows)
        .mark_rect()
        .encode(
            x=alt.X("head:O"),
            y=alt.Y("feature:N", title=None),
            color=alt.Color("score:Q", title="[CLS] attention", scale=alt.Scale(scheme="viridis")),
            tooltip=["task", "model", "feature", "head", alt.Tooltip("score:Q", format=".3f"), "n_examples"],
        )
        .properties(width=alt.Step(16), height=alt.Step(16))
        .facet(
            row=alt.Row("role:N", title=None, sort=in_order(rows, "role")),
            column=alt.Column("task:N", title=None, sort=in_order(rows, "task")),
        )
        .properties(title=f"{title}: final-layer [CLS] attention by feature type")
    )


def kovaleva_task_scores_chart(rows: pl.DataFrame, title: str) -> alt.FacetChart:
    """Kovaleva Table 1: each task's validation score per setting (pre-trained, random init then
    fine-tuned, pre-trained then fine-tuned) on its headline metric, the paper's BERT-base score
    as a tick where it reports one."""
    headline = pl.when((pl.col("metric") == "accuracy").any().over("task")).then(pl.lit("accuracy"))
    rows = rows.filter(pl.col("metric") == headline.otherwise(pl.lit("pearson")))
    x = alt.X("setting:N", title=None, sort=in_order(rows, "setting"))
    bars = (
        alt.Chart()
        .mark_bar()
        .encode(
            x=x,
            y=alt.Y("score:Q", title="score (tick: the paper's)"),
            color=alt.Color("setting:N", sort=in_order(rows, "setting")),
            tooltip=["task", "setting", "metric", alt.Tooltip("score:Q", format=".3f"), "paper_score", "n_examples"],
        )
    )
    paper = alt.Chart().mark_tick(color="black", thickness=2).encode(x=x, y="paper_score:Q")
    return (
        alt.layer(bars, paper, data=rows)
        .properties(width=alt.Step(28), height=200)
        .facet(column=alt.Column("task:N", title=None, sort=in_order(rows, "task")))
        .properties(title=f"{title}: task scores by setting")
    )


def kovaleva_framenet_ablation_chart(rows: pl.DataFrame, title: str) -> alt.FacetChart:
    """Kovaleva §5: each head's FrameNet mean max attention (x) against the score change when it
    is disabled (y), one panel per task; the heads above the FrameNet 99th percentile stand out,
    so whether they matter for the task can be read off their height."""
    rows = rows.with_columns(head_label=pl.format("{}-{}", "layer", "head"))
    points = (
        alt.Chart()
        .mark_circle(size=45, opacity=0.8)
        .encode(
            x=alt.X("mean_max_attention:Q", title="FrameNet mean max attention"),
            y=alt.Y("delta_vs_baseline:Q", title="score change with the head disabled (points)"),
            color=alt.Color("above_p99:N", title="above p99", sort=[True, False]),
            tooltip=[
                alt.Tooltip("head_label:N", title="head"),
                alt.Tooltip("mean_max_attention:Q", format=".3f"),
                alt.Tooltip("delta_vs_baseline:Q", format=".2f"),
                "delta_rank",
                "n_heads",
            ],
        )
    )
    return (
        layer_paper_marks([points], paper_marks("kovaleva_sec5_framenet_ablation"), data=rows)
        .properties(width=260, height=220)
        .facet(column=alt.Column("task:N", title=None, sort=in_order(rows, "task")))
        .properties(title=f"{title}: do the FrameNet heads matter for the task?")
    )
