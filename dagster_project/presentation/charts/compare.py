"""Charts that compare models: per-layer results on relative depth, head matches, every claim's verdict per
model (the scorecard matrix); and the weightings of the maps side by side."""

import altair as alt
import polars as pl

from dagster_project.compute.weightings import AGGREGATIONS, TOKEN_CLASSES, WEIGHTINGS
from dagster_project.presentation.charts.common import in_order, layer_paper_marks, short_model_names
from dagster_project.presentation.paper_marks import paper_marks
from dagster_project.presentation.scorecard import MATRIX_VERDICTS, VERDICT_COLOURS, matrix_columns


def _with_model_names(rows: pl.DataFrame) -> pl.DataFrame:
    return rows.with_columns(model_name=short_model_names(pl.col("model")), source=pl.col("model"))


def _interval(rows: pl.DataFrame, value: str, only_value: bool) -> tuple[str, str] | None:
    """The 95% interval columns of `value`: <value>_ci_low/<value>_ci_high, or ci_low/ci_high when
    `value` is the only one drawn from the view; None where the view has none."""
    candidates = [(f"{value}_ci_low", f"{value}_ci_high"), *([("ci_low", "ci_high")] if only_value else [])]
    return next((pair for pair in candidates if set(pair) <= set(rows.columns)), None)


def depth_curves_chart(
    rows: pl.DataFrame, title: str, values: tuple[str, ...], label: str, series: str | None = None
) -> alt.FacetChart:
    """Every model's per-layer result on relative depth ((layer - 0.5) / n_layers, so a 6- and a
    12-layer model share the axis), one panel per corpus: a line per model (and `series`: a value
    column or a view column such as the target type) through the per-layer mean over heads, the
    heads as faint points, and the 95% interval as error bars where the view carries one."""
    rows = _with_model_names(rows)
    index = [
        column
        for column in ("model_name", "source", "corpus", "layer", "relative_depth", "head")
        if column in rows.columns
    ]
    parts = []
    for value in values:
        interval = _interval(rows, value, len(values) == 1)
        part = rows.select(
            *index,
            pl.lit(value).alias("series") if series is None else pl.col(series).cast(pl.String).alias("series"),
            pl.col(value).cast(pl.Float64).alias("value"),
            *(
                pl.col(column).cast(pl.Float64).alias(name)
                for column, name in zip(interval or (), ("ci_low", "ci_high"))
            ),
        )
        if series is not None and len(values) > 1:
            part = part.with_columns(series=pl.format("{} {}", pl.lit(value), "series"))
        parts.append(part)
    long = pl.concat(parts, how="diagonal_relaxed")
    color = alt.Color("model_name:N", title="model", sort=in_order(long, "model_name"))
    x = alt.X("relative_depth:Q", title="relative depth ((layer - 0.5) / layers)", scale=alt.Scale(domain=[0, 1]))
    tooltip = ["model_name", "source", "series", "layer", alt.Tooltip("relative_depth:Q", format=".2f")]
    # The line is the mean over a layer's heads (rows of per-layer views are their own mean).
    layers = [
        alt.Chart()
        .mark_line(point=True)
        .encode(
            x=x,
            y=alt.Y("mean(value):Q", title=label),
            color=color,
            strokeDash=alt.StrokeDash("series:N", title=None, legend=alt.Legend(symbolType="stroke")),
            tooltip=[*tooltip, alt.Tooltip("mean(value):Q", format=".3f", title="mean over heads")],
        )
    ]
    if "head" in long.columns:
        layers.append(
            alt.Chart()
            .mark_point(size=14, opacity=0.3, filled=True)
            .encode(
                x=x,
                y="value:Q",
                color=color,
                shape=alt.Shape("series:N", title=None),
                tooltip=[*tooltip, "head", alt.Tooltip("value:Q", format=".3f")],
            )
        )
    if "ci_low" in long.columns:
        layers.append(alt.Chart().mark_rule(opacity=0.4).encode(x=x, y="ci_low:Q", y2="ci_high:Q", color=color))
    return (
        alt.layer(*layers, data=long)
        .properties(width=300, height=220)
        .facet(column=alt.Column("corpus:N", title=None, sort=in_order(long, "corpus")))
        .properties(title=f"{title}: {label} by relative depth")
    )


def compare_head_matches_chart(rows: pl.DataFrame, title: str) -> alt.FacetChart:
    """Head correspondence: each head (x: its relative depth) against its nearest head in the other
    model (y: that head's relative depth), coloured by their Jensen-Shannon distance; heads on the
    diagonal do at the same relative depth what their match does."""
    rows = rows.with_columns(
        other=short_model_names(pl.col("other_model")),
        head_label=pl.format("{}-{}", "layer", "head"),
        match_label=pl.format("{}-{}", "other_layer", "other_head"),
    )
    depth = alt.Scale(domain=[0, 1])
    points = (
        alt.Chart()
        .mark_circle(size=50, opacity=0.8)
        .encode(
            x=alt.X("relative_depth:Q", title="head's relative depth", scale=depth),
            y=alt.Y("other_relative_depth:Q", title="nearest head's relative depth", scale=depth),
            color=alt.Color("js_distance:Q", title="JS distance", scale=alt.Scale(scheme="viridis", reverse=True)),
            tooltip=[
                alt.Tooltip("head_label:N", title="head"),
                alt.Tooltip("match_label:N", title="nearest head"),
                "other_model",
                alt.Tooltip("js_distance:Q", format=".3f"),
                alt.Tooltip("runner_up_distance:Q", format=".3f"),
                "n_examples",
                "n_words",
            ],
        )
    )
    # y = x through the heads' own depths: a head on it matches a head at its own relative depth.
    diagonal = alt.Chart().mark_line(color="#999", strokeDash=[4, 3]).encode(x="relative_depth:Q", y="relative_depth:Q")
    return (
        alt.layer(diagonal, points, data=rows)
        .properties(width=260, height=260)
        .facet(column=alt.Column("other:N", title="nearest head in", sort=in_order(rows, "other")))
        .properties(title=f"{title}: each head's nearest head in another model (word-level JS distance)")
    )


def scorecard_matrix_chart(rows: pl.DataFrame, title: str) -> alt.Chart:
    """Every claim (y, in the registry's order) against every model (x, each random-init control right
    after its base), one cell per (claim, model) in its verdict's fixed colour (VERDICT_COLOURS);
    hovering a cell gives the paper's number, the model's, the corpora and the reason, which states
    the interval where the claim rests on a sample. Rows: scorecard_matrix's."""
    columns = matrix_columns(rows)
    labels = {column.model_id: column.heading for column in columns}
    cells = rows.with_columns(column=pl.col("model_id").replace_strict(labels)).sort("claim_order")
    return (
        alt.Chart(cells)
        .mark_rect(stroke="white", strokeWidth=1)
        .encode(
            x=alt.X("column:N", title=None, sort=list(labels.values()), axis=alt.Axis(orient="top", labelAngle=-30)),
            # the whole claim id: the ones of a figure differ at their ends
            y=alt.Y("claim:N", title=None, sort=in_order(cells, "claim"), axis=alt.Axis(labelLimit=400)),
            color=alt.Color(
                "verdict:N",
                title="verdict",
                scale=alt.Scale(domain=list(MATRIX_VERDICTS), range=[VERDICT_COLOURS[v] for v in MATRIX_VERDICTS]),
            ),
            tooltip=[
                "claim",
                alt.Tooltip("model:N", title="model"),
                "verdict",
                alt.Tooltip("paper_text:N", title="paper"),
                alt.Tooltip("model_value:Q", title="this model", format=".4g"),
                "n",
                "corpora",
                "reason",
            ],
        )
        .properties(width=alt.Step(110), height=alt.Step(14), title=f"{title}: each claim's verdict per model")
    )


WEIGHTING_ORDER = list(WEIGHTINGS)
# the panel titles of the two ways a weighting's maps are read (weightings.AGGREGATIONS)
AGGREGATION_TITLES = {"per_layer": "each layer's own map", "rolled_out": "maps rolled out through the layers"}


def weightings_by_layer_chart(rows: pl.DataFrame, title: str, values: tuple[str, ...], label: str) -> alt.FacetChart:
    """A model's per-layer shares under each weighting of the maps (docs/methods.md §3.9), side by side:
    one panel per measure, a line per weighting over the layers."""
    long = pl.concat(
        rows.select("layer", "weighting", "n_heads", measure=pl.lit(value), value=pl.col(value).cast(pl.Float64))
        for value in values
    )
    return (
        alt.Chart(long)
        .mark_line(point=True)
        .encode(
            x=alt.X("layer:O", title="layer"),
            y=alt.Y("value:Q", title=label),
            color=alt.Color("weighting:N", title="weighting", sort=WEIGHTING_ORDER),
            tooltip=["weighting", "measure", "layer", "n_heads", alt.Tooltip("value:Q", format=".3f")],
        )
        .properties(width=220, height=200)
        .facet(column=alt.Column("measure:N", title=None, sort=list(values)))
        .properties(title=f"{title}: {label} by layer, per weighting of the maps")
    )


def weightings_dependency_chart(rows: pl.DataFrame, title: str) -> alt.Chart:
    """Clark Table 1 per weighting: each relation's best head accuracy under each weighting of the maps, a
    bar per weighting (its head as layer-head; head 0 of a per-layer weighting is the layer's one map), the
    best fixed-offset baseline as a tick."""
    rows = rows.with_columns(best_head=pl.format("{}-{} {}", "layer", "head", "direction"))
    relations = in_order(rows, "relation")
    bars = (
        alt.Chart()
        .mark_bar()
        .encode(
            x=alt.X("accuracy:Q", title="best head's accuracy", scale=alt.Scale(domain=[0, 1])),
            y=alt.Y("weighting:N", title=None, sort=WEIGHTING_ORDER),
            color=alt.Color("weighting:N", title="weighting", sort=WEIGHTING_ORDER),
            tooltip=["relation", "weighting", "best_head", alt.Tooltip("accuracy:Q", format=".3f"), "n"],
        )
    )
    baseline = alt.Chart().mark_tick(color="black", thickness=2).encode(x="baseline_accuracy:Q", y="weighting:N")
    return (
        alt.layer(bars, baseline, data=rows)
        .properties(width=260, height=60)
        .facet(row=alt.Row("relation:N", title=None, sort=relations))
        .properties(title=f"{title}: best dependency head per weighting (tick: best offset baseline)")
    )


def value_norms_chart(rows: pl.DataFrame, title: str) -> alt.Chart:
    """Mean value-vector norm ||f(x)|| per layer and token class (Kobayashi et al. 2020)."""
    return (
        alt.Chart(rows)
        .mark_line(point=True)
        .encode(
            x=alt.X("layer:O", title="layer"),
            y=alt.Y("mean_norm:Q", title="mean ||f(x)||"),
            color=alt.Color("token_class:N", title="token class", sort=list(TOKEN_CLASSES)),
            tooltip=["token_class", "layer", alt.Tooltip("mean_norm:Q", format=".3f"), "n_tokens", "n_examples"],
        )
        .properties(width=300, height=220, title=f"{title}: value-vector norms by layer and token class")
    )


def weightings_faithfulness_chart(rows: pl.DataFrame, title: str) -> alt.FacetChart:
    """GlobEnc §5: per weighting of the maps, the mean Spearman correlation of the last layer's [CLS]
    attribution with the classifier's gradient x input saliency (its mean in Fisher's z), a bar with its 95%
    interval over examples; a panel per aggregation (the last layer's own map; every layer rolled out, the
    setting in which GlobEnc compares the maps with the saliency)."""
    rows = rows.with_columns(panel=pl.col("aggregation").replace_strict(AGGREGATION_TITLES))
    encoding = {"y": alt.Y("weighting:N", title=None, sort=WEIGHTING_ORDER)}
    bars = (
        alt.Chart()
        .mark_bar()
        .encode(
            x=alt.X("spearman:Q", title="Spearman with gradient x input", scale=alt.Scale(domain=[-1, 1])),
            color=alt.Color("weighting:N", title="weighting", sort=WEIGHTING_ORDER),
            tooltip=[
                "weighting",
                "aggregation",
                alt.Tooltip("spearman:Q", format=".3f"),
                alt.Tooltip("mean_spearman:Q", format=".3f"),
                alt.Tooltip("ci_low:Q", format=".3f"),
                alt.Tooltip("ci_high:Q", format=".3f"),
                "n_examples",
            ],
            **encoding,
        )
    )
    interval = alt.Chart().mark_rule(color="black").encode(x="ci_low:Q", x2="ci_high:Q", **encoding)
    return (
        alt.layer(bars, interval, data=rows)
        .properties(width=300, height=160)
        .facet(column=alt.Column("panel:N", title=None, sort=[AGGREGATION_TITLES[name] for name in AGGREGATIONS]))
        .properties(title=f"{title}: faithfulness of each weighting ([CLS] row of the last layer)")
    )


def weightings_hta_agreement_chart(rows: pl.DataFrame, title: str) -> alt.HConcatChart:
    """Per layer, each weighting's agreement with HTA: the mean over examples of the row Spearman between
    its map at the layer and HTA's input contribution, a line per weighting with its 95% bootstrap
    interval; a panel per aggregation (the layer's own map, with GlobEnc's BERT-base number, which is of
    that reading (paper_marks.py); the maps rolled out up to the layer)."""
    encoding = {
        "x": alt.X("layer:O", title="layer"),
        "color": alt.Color("weighting:N", title="weighting", sort=WEIGHTING_ORDER),
    }
    label = "mean row Spearman with HTA"
    lines = (
        alt.Chart()
        .mark_line(point=True)
        .encode(
            y=alt.Y("spearman:Q", title=label, scale=alt.Scale(domain=[-1, 1])),
            tooltip=[
                "weighting",
                "aggregation",
                "layer",
                alt.Tooltip("relative_depth:Q", format=".2f"),
                alt.Tooltip("spearman:Q", format=".3f"),
                alt.Tooltip("ci_low:Q", format=".3f"),
                alt.Tooltip("ci_high:Q", format=".3f"),
                "n_examples",
                "n_rows",
                "hta_method",
            ],
            **encoding,
        )
    )
    intervals = alt.Chart().mark_errorbar().encode(y=alt.Y("ci_low:Q", title=label), y2="ci_high:Q", **encoding)
    panels = []
    for aggregation in (name for name in AGGREGATIONS if name in set(rows["aggregation"])):
        part = rows.filter(pl.col("aggregation") == aggregation)
        marks = paper_marks("compare_weightings_hta_agreement", aggregation)
        panels.append(
            layer_paper_marks([lines, intervals], marks, part, data=part).properties(
                width=320, height=220, title=AGGREGATION_TITLES[aggregation]
            )
        )
    return alt.hconcat(*panels).properties(title=f"{title}: each weighting's maps against HTA, per layer")
