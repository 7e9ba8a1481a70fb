"""Static HTML report: one page per paper with every chart of that paper (from the chart
registry), for every model in the warehouse, a model selector and a few headline numbers; and
per model a page of the example maps of the heads its results name. The index opens on the
scorecard: every model's verdicts side by side (a chart drawn here, from the rows of
scorecard_matrix: a chart asset is drawn per model, and this one is of every model at once), then
each model's claims one by one.

Each page opens on the model with the most results on it; models without any are listed apart.
Charts are drawn from the views the way the chart assets draw them and embedded as PNG data
URIs, and the selector is plain JavaScript, so the pages open offline from disk. A chart that
cannot be drawn says what it needs: a capability the model lacks, or the command that fills it.
Under each chart: the examples its numbers come from, with a warning below the chart's minimum.
"""

import base64
import html
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import altair as alt
import polars as pl

from dagster_project.presentation.chart_registry import CHARTS, NEEDS, ChartSpec
from dagster_project.presentation.charts.common import CHART_SCALE, chart_png, mark_layers, png_width
from dagster_project.presentation.charts.compare import scorecard_matrix_chart
from dagster_project.presentation.consistency import replaced_examples_html
from dagster_project.presentation.paper_marks import mark_of_claim
from dagster_project.presentation.report_data import HEAD_LINKS, ExampleCount, ReportData
from dagster_project.presentation.scorecard import (
    MATRIX_VERDICTS,
    VERDICT_COLOURS,
    VERDICT_MEANINGS,
    matrix_columns,
    matrix_html,
    scorecard_html,
)

PAPER_TITLES = {
    "clark": "Clark et al. 2019, What Does BERT Look At? An Analysis of BERT's Attention",
    "kovaleva": "Kovaleva et al. 2019, Revealing the Dark Secrets of BERT",
    "pascual": "Pascual et al. 2021, Telling BERT's Full Story: from Local Attention to Global Aggregation",
    "compare": "Models compared: every registered model's per-layer results on relative depth, and head correspondence",
}
HEADS_FOLDER = "heads"  # beside the paper pages: one page per model with its named heads' maps
# Where a named head's maps are drawn from when the result's own corpus kept none: the corpora
# whose attention pass keeps every head's whole maps (Clark Figs. 1 and 5), in this order.
MAP_CORPORA = ("wiki_segments", "ud_ewt_test", "ontogum")


@dataclass(frozen=True)
class Headline:
    """One column of a paper's headline table: `aggregate` over heads of a chart view's
    `column`, per layer, on the corpus the chart draws; where `paper` names a claim with a paper
    mark (paper_marks.py), a column beside it with the paper's BERT-base value at the layers the
    paper gives it for (by relative depth)."""

    chart: str
    column: str
    aggregate: str  # a polars aggregation: "max", "mean"
    label: str
    where: tuple[tuple[str, str], ...] = ()  # (column, value) filters on the view rows
    paper: str | None = None  # the claim whose paper mark gives the paper's value


HEADLINES = (
    Headline("clark_fig2_special_tokens", "to_sep", "max", "max attention to [SEP] over heads"),
    Headline(
        "clark_fig2_special_tokens",
        "to_sep",
        "mean",
        "mean attention to [SEP] over heads",
        paper="clark_sep_layers_6_10",
    ),
    Headline("clark_fig2_special_tokens", "to_cls", "max", "max attention to [CLS] over heads"),
    Headline("clark_fig4_entropy", "entropy", "mean", "mean head entropy (nats)"),
    Headline(
        "clark_fig4_entropy",
        "cls_entropy",
        "mean",
        "mean [CLS] entropy over heads (nats)",
        paper="clark_cls_entropy_last_layer",
    ),
    Headline(
        "pascual_fig4_center_of_mass",
        "center_of_mass",
        "mean",
        "attention center of mass (tokens)",
        (("kind", "attention"), ("scope", "all")),
    ),
)


_SELECTOR_SCRIPT = """
const select = document.getElementById("model-select");
const [chosen, chart] = decodeURIComponent(location.hash.slice(1)).split("/");
if ([...select.options].some(option => option.value === chosen)) select.value = chosen;
function showModel() {
  for (const section of document.querySelectorAll("section.model")) \
section.hidden = section.dataset.model !== select.value;
}
select.addEventListener("change", showModel);
showModel();
if (chart) document.getElementById(`${select.value}/${chart}`)?.scrollIntoView();
"""

_STYLE = """
body { font-family: sans-serif; margin: 1.5em; color: #222; }
figure { margin: 1em 0; } figcaption { color: #555; font-size: 0.9em; }
table { border-collapse: collapse; margin: 0.5em 0 1em; } \
td, th { border: 1px solid #ccc; padding: 2px 8px; text-align: right; }
.missing { background: #fff4e5; border: 1px solid #f0b060; padding: 0.5em 1em; }
.missing[data-needs] { background: #f2f2f2; border-color: #bbb; }
.quick { background: #eef5ff; border: 1px solid #7aa7e0; padding: 0.5em 1em; } \
.few { background: #fdecea; border: 1px solid #e0877d; padding: 0.3em 1em; }
.source, .apart, .heads { color: #555; font-size: 0.9em; }
.verdict-holds b { color: #1a7f37; } .verdict-fails b { color: #c0392b; } \
.verdict-missing b, .verdict-not-comparable b { color: #777; } \
table.scorecard td, table.scorecard th { text-align: left; } \
table.matrix td { text-align: center; } table.matrix td:first-child, table.matrix th { text-align: left; }
.swatch { display: inline-block; width: 0.9em; height: 0.9em; vertical-align: middle; margin: 0 0.3em 0 0.8em; }
nav a { margin-right: 1em; }
"""


def charts_by_paper(specs: Iterable[ChartSpec] = CHARTS) -> dict[str, list[ChartSpec]]:
    """The registered charts grouped by paper, papers in registry order."""
    papers: dict[str, list[ChartSpec]] = {}
    for spec in specs:
        papers.setdefault(spec.paper, []).append(spec)
    return papers


def _img(png: bytes, alt_text: str) -> str:
    """An embedded PNG shown at the size it was drawn (it holds CHART_SCALE pixels per chart pixel)."""
    encoded = base64.b64encode(png).decode()
    return f'<img alt="{alt_text}" width="{round(png_width(png) / CHART_SCALE)}" src="data:image/png;base64,{encoded}">'


def _paper_column(headline: Headline, rows: pl.DataFrame) -> pl.DataFrame | None:
    """Per layer of the rows, the paper's value of the headline's claim at the layers its mark
    spans (every layer where it spans all), null elsewhere; None without a paper mark."""
    mark = mark_of_claim(headline.paper) if headline.paper else None
    if mark is None:
        return None
    every = rows["layer"].unique().sort().to_list()
    spanned = mark_layers(mark, rows)
    at = set(every if spanned is None else spanned)
    return pl.DataFrame(
        {"layer": every, f"paper: {headline.label}": [mark.values[0] if layer in at else None for layer in every]},
        schema_overrides={"layer": rows.schema["layer"], f"paper: {headline.label}": pl.Float64},
    )


def headline_table(data: ReportData, headlines: Iterable[Headline], model_id: str) -> pl.DataFrame | None:
    """Per layer, one column per headline whose chart has rows for the model (None if none has),
    followed by the paper's value where the headline has one (`paper: <label>`)."""
    columns = []
    for headline in headlines:
        found = data.chart_rows.get((model_id, headline.chart))
        if not isinstance(found, tuple):
            continue
        corpus, rows = found
        rows = rows.filter(*(pl.col(column) == value for column, value in headline.where)) if headline.where else rows
        aggregate = getattr(pl.col(headline.column), headline.aggregate)()
        columns.append(rows.group_by("layer").agg(aggregate.alias(f"{headline.label} ({corpus})")))
        paper = _paper_column(headline, rows)
        if paper is not None:
            columns.append(paper)
    if not columns:
        return None
    table = columns[0]
    for column in columns[1:]:
        table = table.join(column, on="layer", how="full", coalesce=True)
    return table.sort("layer")


def results_on_page(data: ReportData, specs: Iterable[ChartSpec], model_id: str) -> int:
    """How many of the page's charts draw rows of the model itself (not only other models' rows)."""
    count = 0
    for spec in specs:
        found = data.chart_rows.get((model_id, spec.name))
        if isinstance(found, tuple):
            rows = found[1]
            count += "model_id" not in rows.columns or not rows.filter(pl.col("model_id") == model_id).is_empty()
    return count


def _page(title: str, body: str, script: str = "") -> str:
    return (
        f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"<style>{_STYLE}</style></head>\n<body>\n{body}\n"
        + (f"<script>{script}</script>\n" if script else "")
        + "</body></html>\n"
    )


def _nav(papers: Iterable[str], prefix: str = "") -> str:
    links = "".join(f'<a href="{prefix}{paper}.html">{html.escape(paper.capitalize())}</a>' for paper in papers)
    return f'<nav><a href="{prefix}index.html">Index</a>{links}</nav>'


def _html_table(table: pl.DataFrame) -> str:
    header = "".join(f"<th>{html.escape(name)}</th>" for name in table.columns)

    def cell(value):
        return "" if value is None else (f"{value:.3f}" if isinstance(value, float) else html.escape(str(value)))

    rows = "".join("<tr>" + "".join(f"<td>{cell(value)}</td>" for value in row) + "</tr>" for row in table.iter_rows())
    return f"<table><tr>{header}</tr>{rows}</table>"


def _missing_note(spec: ChartSpec, name: str, source: str, reason: str, lacks: dict[str, str] | None = None) -> str:
    """Why the chart is not drawn for the model: a need of the chart it lacks, else the command that fills it."""
    lacking = [need for need in spec.needs if need in (lacks or {})]
    if lacking:
        need = lacking[0]
        return (
            f'<p class="missing" data-chart="{html.escape(spec.name)}" data-needs="{need}">'
            f"{html.escape(spec.label)}: needs {html.escape(NEEDS[need])}; {html.escape(name)} "
            f"{html.escape(lacks[need])}.</p>"
        )
    command = shlex.join(
        ["attn-warehouse", "run", source, "--corpus", spec.corpora[0], *(["--hta"] if spec.analysis == "hta" else [])]
    )
    return (
        f'<p class="missing" data-chart="{html.escape(spec.name)}">{html.escape(spec.label)}: not materialized for '
        f"{html.escape(name)} ({html.escape(reason)}): run <code>{html.escape(command)}</code>, or materialize "
        f"<code>{html.escape(spec.name)}</code> for this partition in the UI"
        + (f" ({html.escape(spec.when_empty)})" if spec.when_empty else "")
        + "; <code>attn-warehouse reproduce --quick</code> fills every result.</p>"
    )


def _count_text(data: ReportData, count: ExampleCount, model_id: str) -> str:
    of = f" of {count.total}" if count.total is not None and count.total != count.n else ""
    whose = "" if count.model_id == model_id else f", {data.name(count.model_id)}"
    return f"{count.n}{of} examples ({count.corpus}{whose})"


def _examples_note(data: ReportData, spec: ChartSpec, model_id: str) -> tuple[str, str]:
    """The caption's n, and a warning for every (model, corpus) drawn from fewer examples than
    the chart's minimum."""
    counts = data.counts.get((model_id, spec.name), [])
    if not counts:
        return "", ""
    caption = "; n = " + ", ".join(_count_text(data, count, model_id) for count in counts)
    few = [count for count in counts if count.n < spec.minimum.examples]
    if not few:
        return caption, ""
    warning = (
        f'<p class="few" data-chart="{html.escape(spec.name)}">Few examples: '
        + "; ".join(html.escape(_count_text(data, count, model_id)) for count in few)
        + f", under this chart's minimum of {spec.minimum.examples} ({html.escape(spec.minimum.reason)}).</p>"
    )
    return caption, warning


def _head_anchor(layer: int, head: int) -> str:
    return f"L{layer}-H{head}"


def _head_links(data: ReportData, spec: ChartSpec, model_id: str) -> str:
    heads = data.heads.get(model_id)
    if heads is None or spec.name not in HEAD_LINKS:
        return ""
    named = heads.filter(pl.col("chart") == spec.name)
    if named.is_empty():
        return ""
    links = ", ".join(
        f'<a href="{HEADS_FOLDER}/{model_id}.html#{_head_anchor(layer, head)}">{layer}-{head}</a> '
        f"({html.escape(label)})"
        for layer, head, label in named.select("layer", "head", "label").iter_rows()
    )
    return (
        f'<p class="heads" data-chart="{html.escape(spec.name)}">Heads named here, with their example maps: {links}</p>'
    )


def chart_anchor(model_id: str, chart: str) -> str:
    """The id of a model's block of a chart on its paper's page: `<paper>.html#<model_id>/<chart>`
    opens the page on that model and scrolls to the chart."""
    return f"{model_id}/{chart}"


def _chart_block(data: ReportData, spec: ChartSpec, model_id: str, source: str) -> str:
    anchor = html.escape(chart_anchor(model_id, spec.name))
    return f'<div id="{anchor}">{_chart_content(data, spec, model_id, source)}</div>'


def _chart_content(data: ReportData, spec: ChartSpec, model_id: str, source: str) -> str:
    found = data.chart_rows[model_id, spec.name]
    if isinstance(found, str):
        return _missing_note(spec, data.name(model_id), source, found, data.lacks.get(model_id))
    corpus, rows = found
    png = chart_png(spec.draw(rows, spec.title(rows, corpus)))
    caption, warning = _examples_note(data, spec, model_id)
    return (
        f'<figure data-chart="{html.escape(spec.name)}">{_img(png, html.escape(spec.label))}'
        f"<figcaption>{html.escape(spec.label)}: model <code>{html.escape(spec.source(rows))}</code>, "
        f"view <code>{html.escape(spec.view)}</code>, corpus {html.escape(corpus)}, "
        f"{rows.height} rows{html.escape(caption)}</figcaption></figure>" + warning + _head_links(data, spec, model_id)
    )


def ranked_models(data: ReportData, specs: list[ChartSpec]) -> tuple[list[str], list[str]]:
    """The page's models with results on it, most results first (then by name), and those without."""
    results = {model_id: results_on_page(data, specs, model_id) for model_id in data.models["model_id"]}
    ranked = sorted(results, key=lambda model_id: (-results[model_id], data.name(model_id)))
    return [model for model in ranked if results[model]], [model for model in ranked if not results[model]]


QUICK_NOTE = (
    '<p class="quick"><strong>Quick reproduction:</strong> these results were computed at reduced sizes '
    "(<code>attn-warehouse reproduce --quick</code>: fewer examples per corpus, fewer HTA examples, a few "
    "fine-tuning steps); <code>attn-warehouse reproduce</code> recomputes them at the papers' sizes.</p>"
)


def paper_page(data: ReportData, paper: str, specs: list[ChartSpec], papers: list[str]) -> str:
    """One paper's page: a model selector, opening on the model with the most results here,
    and, per model, the headline table and every chart."""
    title = PAPER_TITLES.get(paper, paper.capitalize())
    parts = [_nav(papers), f"<h1>{html.escape(title)}</h1>"]
    if not specs:
        parts.append(
            '<p class="missing">No chart of this paper is registered yet '
            "(CHARTS in dagster_project/presentation/chart_registry.py).</p>"
        )
        return _page(title, "\n".join(parts))
    if data.models.is_empty():
        parts.append('<p class="missing">No models in the warehouse: run <code>attn-warehouse run</code>.</p>')
        return _page(title, "\n".join(parts))
    sources = dict(zip(data.models["model_id"], data.models["source"], strict=True))
    with_rows, without = ranked_models(data, specs)

    def option(model_id: str) -> str:
        return f'<option value="{html.escape(model_id)}">{html.escape(data.name(model_id))}</option>'

    options = "".join(option(model_id) for model_id in with_rows)
    if without:
        options += (
            '<optgroup label="no results on this page">'
            + "".join(option(model_id) for model_id in without)
            + "</optgroup>"
        )
        names = ", ".join(
            f'<span title="{html.escape(sources[model_id])}">{html.escape(data.name(model_id))}</span>'
            for model_id in without
        )
        apart = f'<p class="apart">No results on this page: {names} (their sections say what each chart needs).</p>'
    else:
        apart = ""
    parts.append(f'<label>Model: <select id="model-select">{options}</select></label>{apart}')
    headlines = [headline for headline in HEADLINES if headline.chart in {spec.name for spec in specs}]
    for model_id in [*with_rows, *without]:
        source = sources[model_id]
        section = [
            f'<h2 title="{html.escape(source)}">{html.escape(data.name(model_id))}</h2>'
            f'<p class="source">source: <code>{html.escape(source)}</code></p>'
        ]
        if data.profiles.get(model_id) == "quick":
            section.append(QUICK_NOTE)
        table = headline_table(data, headlines, model_id) if headlines else None
        if table is not None:
            section.append(f'<div class="headlines">{_html_table(table)}</div>')
        section.extend(_chart_block(data, spec, model_id, source) for spec in specs)
        parts.append(
            f'<section class="model" data-model="{html.escape(model_id)}">' + "\n".join(section) + "</section>"
        )
    return _page(title, "\n".join(parts), _SELECTOR_SCRIPT)


_TOKEN_STEP = 11  # pixels per token in a head's example map
# Tokens drawn of each example map: a head's pattern shows in the first few dozen tokens, and a
# whole 128-token map takes seconds to draw and a megabyte per head.
MAP_TOKENS = 40


def head_maps_chart(maps: pl.DataFrame, title: str) -> alt.HConcatChart:
    """One head's kept example maps, a key x query heatmap per example with its tokens on the
    axes, cropped to the first MAP_TOKENS tokens (the panel's title says so)."""
    panels = []
    for (example_id,), cells in maps.partition_by("example_id", as_dict=True, maintain_order=True).items():
        n_tokens = cells["query"].max() + 1
        shown = f"example {example_id}" + (
            f", first {MAP_TOKENS} of {n_tokens} tokens" if n_tokens > MAP_TOKENS else ""
        )
        cells = cells.filter((pl.col("query") < MAP_TOKENS) & (pl.col("key") < MAP_TOKENS)).with_columns(
            key_label=pl.format("{} {}", "key", "key_token"), query_label=pl.format("{} {}", "query", "query_token")
        )
        keys = cells.sort("key")["key_label"].unique(maintain_order=True).to_list()
        queries = cells.sort("query")["query_label"].unique(maintain_order=True).to_list()
        panels.append(
            alt.Chart(cells)
            .mark_rect()
            .encode(
                x=alt.X("key_label:O", sort=keys, title="key (attended)", axis=alt.Axis(labelFontSize=8)),
                y=alt.Y("query_label:O", sort=queries, title="query (attending)", axis=alt.Axis(labelFontSize=8)),
                color=alt.Color("attention:Q", scale=alt.Scale(scheme="blues", domain=[0, 1])),
                tooltip=["query_token", "key_token", alt.Tooltip("attention:Q", format=".3f")],
            )
            .properties(width=len(keys) * _TOKEN_STEP, height=len(queries) * _TOKEN_STEP, title=shown)
        )
    return alt.hconcat(*panels).properties(title=title)


def heads_page(data: ReportData, model_id: str, papers: list[str]) -> str:
    """A model's named heads, one anchored section each: what names it, and its kept example
    maps on the result's corpus where that corpus kept maps, else on the first that did."""
    name, heads = data.name(model_id), data.heads[model_id]
    maps = data.head_maps.get(model_id, pl.DataFrame())
    labels = {spec.name: spec.label for spec in CHARTS}
    parts = [_nav(papers, "../"), f"<h1>Named heads of {html.escape(name)}</h1>"]
    for (layer, head), named in heads.partition_by(["layer", "head"], as_dict=True).items():
        named_by = "; ".join(
            f"{html.escape(labels.get(chart, chart))}: {html.escape(label)} ({html.escape(corpus)})"
            for chart, label, corpus in named.select("chart", "label", "corpus").iter_rows()
        )
        section = [f'<h2 id="{_head_anchor(layer, head)}">Head {layer}-{head}</h2><p>{named_by}</p>']
        of_head = maps.filter((pl.col("layer") == layer) & (pl.col("head") == head)) if maps.height else maps
        kept = set(of_head["corpus"]) if of_head.height else set()
        preferred = [*named["corpus"], *MAP_CORPORA, *sorted(kept)]
        corpus = next((corpus for corpus in preferred if corpus in kept), None)
        if corpus is None:
            section.append(
                '<p class="missing">No kept example maps for this head: materialize wiki_segments_attention_facts '
                "(the pass keeps every head's maps of a corpus's first examples).</p>"
            )
        else:
            chart = head_maps_chart(
                of_head.filter(pl.col("corpus") == corpus), f"{name}, head {layer}-{head}, {corpus}"
            )
            where = f"head {layer}-{head} on the first examples of {html.escape(corpus)}"
            section.append(
                f'<figure data-head="{_head_anchor(layer, head)}">{_img(chart_png(chart), where)}'
                f"<figcaption>attention of {where} (table head_example_maps)</figcaption></figure>"
            )
        parts.append("<section>" + "\n".join(section) + "</section>")
    return _page(f"Named heads of {name}", "\n".join(parts))


def index_page(papers: dict[str, list[ChartSpec]], data: ReportData) -> str:
    items = "".join(
        f'<li><a href="{paper}.html">{html.escape(PAPER_TITLES.get(paper, paper.capitalize()))}</a>: '
        f"{', '.join(html.escape(spec.label) for spec in specs) or 'no charts registered yet'}</li>"
        for paper, specs in papers.items()
    )
    models = data.models.select(
        pl.col("model_id").replace_strict(data.names, default=pl.col("model_id")).alias("name"),
        *(
            column
            for column in ("model_id", "source", "model_type", "n_layers", "n_heads")
            if column in data.models.columns
        ),
    )
    model_table = (
        _html_table(models)
        if not models.is_empty()
        else "<p>No models in the warehouse: run <code>attn-warehouse run</code>.</p>"
    )
    body = (
        f"{_nav(papers)}<h1>Attention warehouse report</h1>{replaced_examples_html(data.replaced_examples)}"
        f"{scorecard_section(data, papers)}"
        f"<h2>Pages</h2><ul>{items}</ul><h2>Models</h2>{model_table}"
    )
    return _page("Attention warehouse report", body, _SELECTOR_SCRIPT if data.scorecard.height else "")


def scorecard_section(data: ReportData, papers: Mapping[str, list[ChartSpec]]) -> str:
    """The report's first page: every claim's verdict per model (reproduction_scorecard), a table per
    paper, a model selector, each claim's result linking to its chart on the paper's page."""
    if data.scorecard.is_empty():
        return (
            '<h2>Scorecard</h2><p class="missing">No scorecard: the warehouse has no models, or its views come '
            "from older code (<code>attn-warehouse run</code> recreates them).</p>"
        )
    chart_paper = {spec.name: paper for paper, specs in papers.items() for spec in specs}
    model_ids = data.scorecard["model_id"].unique(maintain_order=True).to_list()
    options = "".join(
        f'<option value="{html.escape(model_id)}">{html.escape(data.name(model_id))}</option>' for model_id in model_ids
    )
    sections = []
    for model_id in model_ids:
        rows = data.scorecard.filter(pl.col("model_id") == model_id)
        pages = {chart: f"{paper}.html#{chart_anchor(model_id, chart)}" for chart, paper in chart_paper.items()}
        note = QUICK_NOTE if data.profiles.get(model_id) == "quick" else ""
        sections.append(
            f'<section class="model" data-model="{html.escape(model_id)}"><h3>{html.escape(data.name(model_id))}</h3>'
            f"{note}{scorecard_html(rows, pages, papers)}</section>"
        )
    return (
        matrix_section(data) + "<h2>Scorecard: does each paper's finding hold?</h2>"
        "<p>Every claim of the three papers, the paper's number (BERT-base) beside this model's, judged by the "
        "rule in <code>sql/claims/</code>; hover a claim for the paper's sentence, follow its result to the chart.</p>"
        f'<label>Model: <select id="model-select">{options}</select></label>' + "\n".join(sections)
    )


def matrix_section(data: ReportData) -> str:
    """Every model side by side (scorecard_matrix): the chart of each claim's verdict per model, a
    legend, and the matrix as a table whose cells give their reasons on hover; empty without rows."""
    if data.matrix.is_empty():
        return ""
    columns = matrix_columns(data.matrix)
    controls = sum(column.is_control for column in columns)
    chart = scorecard_matrix_chart(data.matrix, "Scorecard")
    legend = "".join(
        f'<span class="swatch" style="background:{VERDICT_COLOURS[verdict]}"></span>'
        f"<b>{html.escape(verdict)}</b>: {html.escape(VERDICT_MEANINGS[verdict])}"
        for verdict in MATRIX_VERDICTS
    )
    return (
        "<h2>Scorecard: every model side by side</h2>"
        f"<p>{data.matrix['claim'].n_unique()} claims x {len(columns)} models (random-init controls: {controls}, each "
        "right after its base model: a finding that holds for random weights too says little about what training "
        "taught). One verdict per claim and model: a claim judged on several corpora has the verdict they agree on, "
        "<b>mixed</b> where they disagree (hover its cell in the table for each corpus's verdict). From the view "
        "<code>scorecard_matrix</code>; <code>attn-warehouse scorecard --matrix</code> prints it.</p>"
        f'<p class="legend">{legend}</p>'
        f'<figure data-chart="scorecard_matrix">{_img(chart_png(chart), "each claim&#39;s verdict per model")}'
        "<figcaption>Each claim's verdict per model (claims in the papers' order).</figcaption></figure>"
        "<details><summary>The matrix as a table (hover a cell for its reason, a model for its source)</summary>"
        f"{matrix_html(data.matrix)}</details>"
    )


def write_report(data: ReportData, out_dir: Path, specs: Iterable[ChartSpec] = CHARTS) -> list[Path]:
    """Write index.html, one <paper>.html per paper and heads/<model_id>.html per model whose
    results name heads into `out_dir`; returns the pages."""
    papers = {paper: [] for paper in PAPER_TITLES} | charts_by_paper(specs)
    out_dir.mkdir(parents=True, exist_ok=True)
    pages = [out_dir / "index.html"]
    pages[0].write_text(index_page(papers, data))
    for paper, paper_specs in papers.items():
        page = out_dir / f"{paper}.html"
        page.write_text(paper_page(data, paper, paper_specs, list(papers)))
        pages.append(page)
    for model_id in data.heads:
        page = out_dir / HEADS_FOLDER / f"{model_id}.html"
        page.parent.mkdir(exist_ok=True)
        page.write_text(heads_page(data, model_id, list(papers)))
        pages.append(page)
    return pages
