"""What the per-paper chart modules share: map and heatmap marks, category order, model names, saving."""

from pathlib import Path

import altair as alt
import polars as pl

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
    folder, not the whole path); the source itself goes in captions and tooltips."""
    last = sources.str.replace_all("\\", "/", literal=True).str.strip_chars_end("/").str.split("/").list.last()
    return pl.when(last == "").then(sources).otherwise(last)


def short_model_name(source: str) -> str:
    """short_model_names of one source."""
    return pl.select(short_model_names(pl.lit(source))).item()


def save_chart(chart: alt.TopLevelMixin, folder: Path, name: str) -> tuple[Path, Path]:
    """Write `name`.html and `name`.png into `folder`; returns both paths."""
    folder.mkdir(parents=True, exist_ok=True)
    html, png = folder / f"{name}.html", folder / f"{name}.png"
    chart.save(html)
    chart.save(png, scale_factor=1.5)
    return html, png
