"""What the per-paper chart modules share: map and heatmap marks, category order, model names, saving,
and the layer that draws the papers' numbers (presentation/paper_marks.py) on a chart."""

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import altair as alt
import polars as pl
import vl_convert

from dagster_project.compute.controls import PREFIX, SEED_SUFFIX

if TYPE_CHECKING:
    from dagster_project.presentation.paper_marks import PaperMark

# Kovaleva's pattern classes in the paper's order (Fig. 2), shared by her charts and Pascual's Fig. 7.
PATTERN_ORDER = ["vertical", "diagonal", "vertical+diagonal", "block", "heterogeneous"]


def map_cells(rows: pl.DataFrame, value: str, legend: str, labels: list[str]) -> alt.Chart:
    """One attention-like map per facet cell: key x query cells shaded by `value` in [0, 1]."""
    return (
        alt.Chart(rows)
        .mark_rect()
        .encode(
            x=alt.X("key:O", title="key", axis=None),
            y=alt.Y("query:O", title="query", axis=None),
            color=alt.Color(f"{value}:Q", title=legend, scale=alt.Scale(scheme="blues", domain=[0, 1])),
            tooltip=[*labels, "query_token", "key_token", alt.Tooltip(f"{value}:Q", format=".3f")],
        )
        .properties(width=110, height=110)
    )


def in_order(rows: pl.DataFrame, column: str) -> list:
    """The values of `column` in the order the rows bring them (ChartSpec.rows orders tasks as
    the paper does and puts the pre-trained model first)."""
    return list(dict.fromkeys(rows[column]))


def head_heatmap(
    rows: pl.DataFrame, value: str, legend: str, scheme: str, domain: list[float] | None = None
) -> alt.Chart:
    """Layer x head heatmap of one per-head value."""
    return (
        alt.Chart(rows)
        .mark_rect()
        .encode(
            x=alt.X("head:O"),
            y=alt.Y("layer:O", sort="descending"),
            color=alt.Color(
                f"{value}:Q", title=legend, scale=alt.Scale(scheme=scheme, **({"domain": domain} if domain else {}))
            ),
            tooltip=["layer", "head", alt.Tooltip(f"{value}:Q", format=".3f")],
        )
        .properties(width=alt.Step(22), height=alt.Step(22))
    )


def short_model_names(sources: pl.Expr) -> pl.Expr:
    """Models' names for titles and legends: the last part of a hub id or path (a local path's
    folder, not the whole path), a random-init control's base named so with "(random init)" (and its
    seed, other than 0), never like the trained model; the source itself goes in captions and tooltips."""
    is_control = sources.str.starts_with(PREFIX)
    seed = sources.str.extract(SEED_SUFFIX, 1)
    model = pl.when(is_control).then(sources.str.strip_prefix(PREFIX).str.replace(SEED_SUFFIX, "")).otherwise(sources)
    last = model.str.replace_all("\\", "/", literal=True).str.strip_chars_end("/").str.split("/").list.last()
    name = pl.when(last == "").then(model).otherwise(last)
    control = pl.concat_str(
        name,
        pl.lit(" (random init"),
        pl.when(seed.is_not_null()).then(", seed " + seed).otherwise(pl.lit("")),
        pl.lit(")"),
    )
    return pl.when(is_control).then(control).otherwise(name)


def short_model_name(source: str) -> str:
    """short_model_names of one source."""
    return pl.select(short_model_names(pl.lit(source))).item()


# Pixels per chart pixel in every PNG the project writes (chart files, the report): sharp on
# high-density screens; the report shows them at their drawn size (png_width / CHART_SCALE).
CHART_SCALE = 1.5
# Charts whose PNG this process keeps: a run's report draws again, from the same rows, the charts its
# chart assets just drew, and rendering (vl-convert) is most of what a chart costs.
RENDERED_CHARTS = 128
_rendered: dict[str, bytes] = {}
# altair's Vega-Lite version as vl-convert names it ("v6_4"), which chart.save passes too
VEGA_LITE_VERSION = "v" + "_".join(alt.SCHEMA_VERSION.removeprefix("v").split(".")[:2])


def chart_png(chart: alt.TopLevelMixin) -> bytes:
    """`chart` as PNG bytes at CHART_SCALE, the bytes chart.save writes; a chart equal to one rendered
    before in this process (the same Vega-Lite spec, data included) is not rendered again."""
    with alt.data_transformers.disable_max_rows():  # as chart.save does: maps of many examples have many rows
        spec = chart.to_dict()
    # The spec is built once, for the key and the drawing. Compact JSON is the C encoder's; the indented
    # JSON of chart.to_json is pure Python, and took as long as the drawing for maps of many examples.
    key = json.dumps(spec, separators=(",", ":"))
    if key not in _rendered:
        if len(_rendered) >= RENDERED_CHARTS:
            del _rendered[next(iter(_rendered))]  # the oldest
        _rendered[key] = vl_convert.vegalite_to_png(spec, vl_version=VEGA_LITE_VERSION, scale=CHART_SCALE)
    return _rendered[key]


def png_width(png: bytes) -> int:
    """The width in pixels of a PNG (its IHDR chunk)."""
    return int.from_bytes(png[16:20], "big")


def save_chart(chart: alt.TopLevelMixin, folder: Path, name: str) -> tuple[Path, Path]:
    """Write `name`.html and `name`.png into `folder`; returns both paths."""
    folder.mkdir(parents=True, exist_ok=True)
    html, png = folder / f"{name}.html", folder / f"{name}.png"
    chart.save(html)
    png.write_bytes(chart_png(chart))
    return html, png


# The papers' numbers (presentation/paper_marks.py) in a colour no chart's data uses.
PAPER_COLOUR = "#c51b7d"


def bert_layers(rows: pl.DataFrame | None) -> dict[int, int] | None:
    """Per layer of the rows, the BERT-base layer at its relative depth, ceil(12 * relative_depth
    - 1e-9) (None without layers); rows without relative_depth hold every layer of the model."""
    if rows is None or "layer" not in rows.columns or rows.is_empty():
        return None
    if "relative_depth" in rows.columns:
        depths = rows.group_by("layer").agg(pl.col("relative_depth").first())
    else:
        n_layers = int(rows["layer"].max())
        depths = rows.select(pl.col("layer").unique()).with_columns(relative_depth=(pl.col("layer") - 0.5) / n_layers)
    pairs = depths.select("layer", "relative_depth").iter_rows()
    return {int(layer): math.ceil(12 * depth - 1e-9) for layer, depth in pairs}


def mark_layers(mark: "PaperMark", rows: pl.DataFrame | None) -> list[int] | None:
    """The rows' layers a depth-dependent mark spans: those at its BERT-base layers' relative
    depth, and the model's last layer where the mark reaches BERT-base's last (12); None where
    the mark spans every layer or the rows have none."""
    depth = bert_layers(rows)
    if mark.layers is None or depth is None:
        return None
    first, last = mark.layers
    shown = {layer for layer, bert in depth.items() if first <= bert <= last}
    if last == 12:  # "the last layer(s)": the model's last, whatever its depth reads as
        shown.add(max(depth))
    return sorted(shown)


def layer_paper_marks(
    layers: list[alt.TopLevelMixin],
    marks: Sequence["PaperMark"],
    rows: pl.DataFrame | None = None,
    data: pl.DataFrame | None = None,
    layer: str = "layer",
    **categories: alt.FieldChannelMixin,
) -> alt.LayerChart:
    """`layers` (and `data`, shared by them) with the paper's numbers on top: a rule per rule mark
    with its label at its start, a shaded band with its label at its top, a tick at a category
    (`categories`: the chart's encodings of the mark's `at` fields, e.g. y=alt.Y("relation:N"))
    with its label as tooltip. A mark with `layers` spans the rows' layers at those BERT-base
    layers' relative depth on the ordinal `layer` field (drawn nowhere if the model has none there);
    `relative_to` adds the rows' first value of that column. Marks are in PAPER_COLOUR."""
    drawn = []
    for index, mark in enumerate(marks):
        values = list(mark.values)
        if mark.relative_to is not None:
            if rows is None or rows.is_empty() or rows[mark.relative_to][0] is None:
                continue
            values = [value + float(rows[mark.relative_to][0]) for value in values]
        row = {"paper_value": values[0], "paper_label": mark.label}
        if mark.kind == "band":
            row["paper_value2"] = values[1]
        if mark.kind == "tick":
            row |= dict(mark.at)
        value_axis, other = mark.axis, "y" if mark.axis == "x" else "x"
        value = {value_axis: alt.X("paper_value:Q") if value_axis == "x" else alt.Y("paper_value:Q")}
        span = {}
        shown = mark_layers(mark, rows)
        if shown == []:  # the model has no layer at the mark's depth
            continue
        if shown:
            row |= {layer: shown[0], f"{layer}_end": shown[-1]}
            channel, channel2 = (alt.X, alt.X2) if other == "x" else (alt.Y, alt.Y2)
            span = {other: channel(f"{layer}:O", bandPosition=0), f"{other}2": channel2(f"{layer}_end", bandPosition=1)}
            # the label where the span starts, or ends where it starts in the right half
            every = bert_layers(rows)
            right = shown[0] > (min(every) + max(every)) / 2
            start = {other: channel(f"{layer}_end:O", bandPosition=1) if right else span[other]}
        frame = pl.DataFrame([row])
        base = alt.Chart(frame)
        tooltip = alt.Tooltip("paper_label:N", title="paper")
        if mark.kind == "tick":
            drawn.append(base.mark_tick(color=PAPER_COLOUR, thickness=2).encode(**value, **categories, tooltip=tooltip))
            continue
        if mark.kind == "band":
            upper = alt.X2("paper_value2") if value_axis == "x" else alt.Y2("paper_value2")
            drawn.append(
                base.mark_rect(color=PAPER_COLOUR, opacity=0.15).encode(
                    **value, **{f"{value_axis}2": upper}, tooltip=tooltip
                )
            )
            at = {value_axis: alt.X("paper_value2:Q") if value_axis == "x" else alt.Y("paper_value2:Q")}
        else:
            drawn.append(
                base.mark_rule(color=PAPER_COLOUR, strokeDash=[6, 3], strokeWidth=1.5).encode(
                    **value, **span, tooltip=tooltip
                )
            )
            at = value
        if not span:
            start, right = {other: alt.value(0)}, False
        if value_axis == "y":
            text = base.mark_text(
                align="right" if right else "left",
                baseline="bottom",
                dx=-2 if right else 2,
                dy=-2,
                fontSize=10,
                lineBreak="\n",
                color=PAPER_COLOUR,
            )
        else:  # vertical rule: its label at the top, staggered so that neighbouring rules' do not overlap
            text = base.mark_text(
                align="left", baseline="top", dx=3, dy=2 + 12 * index, fontSize=10, lineBreak="\n", color=PAPER_COLOUR
            )
        drawn.append(text.encode(**at, **start, text="paper_label:N"))
    return alt.layer(*layers, *drawn, **({"data": data} if data is not None else {}))
