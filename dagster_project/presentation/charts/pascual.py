"""Charts of Pascual et al. 2021: relative-position histograms, centers of mass, HTA correlations and maps."""

import altair as alt
import polars as pl

from dagster_project.corpora import XNLI_LANGUAGES
from dagster_project.presentation.charts.common import PATTERN_ORDER, in_order, layer_paper_marks, map_cells
from dagster_project.presentation.paper_marks import paper_marks


def pascual_histograms_chart(rows: pl.DataFrame, title: str) -> alt.FacetChart:
    """Pascual Fig. 2/3, appendices A/B: a layer x head grid of max-normalized position histograms."""
    return (
        alt.Chart(rows)
        .mark_line(strokeWidth=1)
        .encode(
            x=alt.X("offset:Q", title="relative position"),
            y=alt.Y("value_max_normalized:Q", title=None, axis=alt.Axis(labels=False, ticks=False)),
            color=alt.Color("scope:N"),
        )
        .properties(width=90, height=50)
        .facet(row=alt.Row("layer:O"), column=alt.Column("head:O"))
        .properties(title=f"{title}: histograms by relative position (each head scaled to its maximum)")
    )


def _center_of_mass_panels(rows: pl.DataFrame, color: alt.Color, dash: str, what: str, title: str) -> alt.FacetChart:
    """Center of mass per layer as lines, one panel per corpus in the rows' order."""
    return (
        alt.Chart(rows)
        .mark_line(point=True)
        .encode(
            x=alt.X("layer:O"),
            y=alt.Y("center_of_mass:Q", title=f"mean {what} (tokens)"),
            color=color,
            strokeDash=alt.StrokeDash(f"{dash}:N"),
            tooltip=["model", "corpus", "layer", "scope", "kind", alt.Tooltip("center_of_mass:Q", format=".2f")],
        )
        .properties(width=300, height=240)
        .facet(column=alt.Column("corpus:N", title=None, sort=in_order(rows, "corpus")))
        .properties(title=f"{title}: {what} per layer")
    )


def pascual_center_of_mass_chart(rows: pl.DataFrame, title: str) -> alt.FacetChart:
    """Pascual Fig. 4/5: mean center of mass of the histograms per layer, one panel per corpus
    (English, German and Arabic XNLI side by side, Fig. 4), attention and contribution (Fig. 5)."""
    return _center_of_mass_panels(rows, alt.Color("scope:N"), "kind", "center of mass", title)


def pascual_center_of_mass_models_chart(rows: pl.DataFrame, title: str) -> alt.FacetChart:
    """Pascual Fig. 4 across models: the attention center of mass per layer of every model with
    rows, one panel per corpus (the paper compares English, German and Arabic BERTs)."""
    rows = rows.filter(pl.col("kind") == "attention")
    color = alt.Color("model:N", sort=in_order(rows, "model"))
    return _center_of_mass_panels(rows, color, "scope", "attention center of mass", title)


def pascual_language_center_of_mass_chart(rows: pl.DataFrame, title: str) -> alt.FacetChart:
    """Pascual Fig. 4 as the paper: per XNLI language, the attention center of mass per layer of
    the language's own model (models.toml `language`) where one has rows, else of every model;
    the legend and tooltip name the model that drew each line and whether it is the language's own.
    Panels in the paper's order, English, German, Arabic (the rows bring the model's own first)."""
    rows = rows.filter(pl.col("kind") == "attention").with_columns(
        drawn_by=pl.when(pl.col("language_model"))
        .then(pl.format("{} ({} model)", "model", "language"))
        .otherwise(pl.col("model"))
    )
    return (
        alt.Chart(rows)
        .mark_line(point=True)
        .encode(
            x=alt.X("layer:O"),
            y=alt.Y("center_of_mass:Q", title="mean attention center of mass (tokens)"),
            color=alt.Color("drawn_by:N", title="drawn by", sort=in_order(rows, "drawn_by")),
            strokeDash=alt.StrokeDash("scope:N"),
            tooltip=[
                "corpus",
                alt.Tooltip("model:N", title="drawn by"),
                alt.Tooltip("language_model:N", title="language's own model"),
                "layer",
                "scope",
                alt.Tooltip("center_of_mass:Q", format=".2f"),
            ],
        )
        .properties(width=300, height=240)
        .facet(column=alt.Column("corpus:N", title=None, sort=[f"xnli_{code}" for code in XNLI_LANGUAGES]))
        .properties(title=f"{title}: attention center of mass per layer, each language by its own model")
    )


def pascual_correlation_chart(rows: pl.DataFrame, title: str, marks: str | None = None) -> alt.VConcatChart:
    """Pascual Fig. 1/6: each head's mean Pearson (top) and Spearman (bottom) correlation of
    attention with a contribution, per layer, with the per-layer median (red line) and, where
    `marks` names the chart, the paper's thresholds of each coefficient (paper_marks.py)."""
    long = rows.unpivot(
        index=["layer", "head", *(["relative_depth"] if "relative_depth" in rows.columns else [])],
        on=["pearson", "spearman"],
        variable_name="coefficient",
        value_name="correlation",
    ).with_columns(pl.col("coefficient").replace_strict({"pearson": "Pearson", "spearman": "Spearman"}))
    panels = []
    for coefficient in ("Pearson", "Spearman"):
        of = long.filter(pl.col("coefficient") == coefficient)
        heads = (
            alt.Chart()
            .mark_circle(size=40, opacity=0.7)
            .encode(
                x=alt.X("layer:O", title="layer"),
                y=alt.Y(
                    "correlation:Q",
                    title=f"mean row correlation ({coefficient})",
                    scale=alt.Scale(domain=[-0.2, 1]),
                ),
                tooltip=["layer", "head", "coefficient", alt.Tooltip("correlation:Q", format=".3f")],
            )
        )
        median = alt.Chart().mark_line(color="#e45756").encode(x="layer:O", y="median(correlation):Q")
        drawn = paper_marks(marks, coefficient) if marks else ()
        panels.append(
            layer_paper_marks([heads, median], drawn, of, data=of).properties(width=420, height=200, title=coefficient)
        )
    return alt.vconcat(*panels).properties(title=title)


_HTA_MAPS = {"attention": "attention", "previous_layer": "previous-layer contribution", "input": "input contribution"}


def pascual_hta_pattern_maps_chart(rows: pl.DataFrame, title: str) -> alt.FacetChart:
    """Pascual Fig. 7: for one head of each Kovaleva pattern class, its attention map above its
    previous-layer and input contribution maps (Appendix C has every head: pascual_hta_example_maps)."""
    rows = rows.with_columns(
        shown=pl.col("map").replace_strict(_HTA_MAPS),
        panel=pl.format("{} ({}-{}, ex. {})", "pattern", "layer", "head", "example_id"),
        pattern_order=pl.col("pattern").replace_strict(
            {pattern: index for index, pattern in enumerate(PATTERN_ORDER)}, default=len(PATTERN_ORDER)
        ),
    ).sort("pattern_order", maintain_order=True)
    return (
        map_cells(rows, "value", "weight", ["panel", "shown"])
        .facet(
            row=alt.Row("shown:N", title=None, sort=list(_HTA_MAPS.values())),
            column=alt.Column("panel:N", title=None, sort=in_order(rows, "panel")),
        )
        .resolve_scale(x="independent", y="independent")
        .properties(title=f"{title}: attention vs Hidden Token Attribution per pattern class")
    )


# App. C draws every head's three maps (3 x L x H panels): its cells are capped so that one PNG stays
# within the renderer's memory (about a million cells exhausted vl-convert's 1.4 GB heap).
APPENDIX_C_TOKENS = 24


def pascual_hta_all_heads_chart(rows: pl.DataFrame, title: str) -> alt.VConcatChart:
    """Pascual App. C: every head's attention, previous-layer and input contribution maps for one
    example, the shortest of Fig. 7's, on its first APPENDIX_C_TOKENS tokens (the view holds every
    Fig. 7 example whole)."""
    lengths = rows.group_by("example_id").agg(n=pl.col("query").max()).sort("n", "example_id")
    example = lengths["example_id"][0]
    shown = rows.filter(
        (pl.col("example_id") == example) & (pl.col("query") < APPENDIX_C_TOKENS) & (pl.col("key") < APPENDIX_C_TOKENS)
    ).with_columns(panel=pl.format("{}-{}", "layer", "head"))
    heads = int(shown["head"].max())
    charts = [
        map_cells(shown.filter(pl.col("map") == name), "value", "weight", ["panel"])
        .properties(width=36, height=36)
        .facet(
            facet=alt.Facet("panel:N", title=None, sort=in_order(shown.sort("layer", "head"), "panel")), columns=heads
        )
        .properties(title=label)
        for name, label in _HTA_MAPS.items()
    ]
    return alt.vconcat(*charts).properties(title=f"{title}: every head on example {example}")
