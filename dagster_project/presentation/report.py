"""Static HTML report: one page per paper with every chart of that paper (from the chart
registry), for every model in the warehouse, a model selector and a few headline numbers.

Charts are drawn from the views the way the chart assets draw them and embedded as PNG
data URIs, and the selector is plain JavaScript, so the pages open offline from disk.
"""

import base64
import html
import io
import shlex
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import duckdb
import polars as pl

from dagster_project.presentation.chart_registry import CHARTS, ChartSpec

PAPER_TITLES = {
    "clark": "Clark et al. 2019, What Does BERT Look At? An Analysis of BERT's Attention",
    "kovaleva": "Kovaleva et al. 2019, Revealing the Dark Secrets of BERT",
    "pascual": "Pascual et al. 2021, Telling BERT's Full Story: from Local Attention to Global Aggregation",
    "compare": "Models compared: every registered model's per-layer results on relative depth, and head correspondence",
}


@dataclass(frozen=True)
class Headline:
    """One column of a paper's headline table: `aggregate` over heads of a chart view's
    `column`, per layer, on the corpus the chart draws."""

    chart: str
    column: str
    aggregate: str  # a polars aggregation: "max", "mean"
    label: str
    where: tuple[tuple[str, str], ...] = ()  # (column, value) filters on the view rows


HEADLINES = (
    Headline("clark_fig2_special_tokens", "to_sep", "max", "max attention to [SEP] over heads"),
    Headline("clark_fig2_special_tokens", "to_cls", "max", "max attention to [CLS] over heads"),
    Headline("clark_fig4_entropy", "entropy", "mean", "mean head entropy (nats)"),
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
const chosen = decodeURIComponent(location.hash.slice(1));
if ([...select.options].some(option => option.value === chosen)) select.value = chosen;
function showModel() {
  for (const section of document.querySelectorAll("section.model")) \
section.hidden = section.dataset.model !== select.value;
}
select.addEventListener("change", showModel);
showModel();
"""

_STYLE = """
body { font-family: sans-serif; margin: 1.5em; color: #222; }
figure { margin: 1em 0; } figcaption { color: #555; font-size: 0.9em; }
table { border-collapse: collapse; margin: 0.5em 0 1em; } \
td, th { border: 1px solid #ccc; padding: 2px 8px; text-align: right; }
.missing { background: #fff4e5; border: 1px solid #f0b060; padding: 0.5em 1em; }
nav a { margin-right: 1em; }
"""


def charts_by_paper(specs: Iterable[ChartSpec] = CHARTS) -> dict[str, list[ChartSpec]]:
    """The registered charts grouped by paper, papers in registry order."""
    papers: dict[str, list[ChartSpec]] = {}
    for spec in specs:
        papers.setdefault(spec.paper, []).append(spec)
    return papers


@dataclass(frozen=True)
class ReportData:
    """What the pages show, read from the warehouse in one short visit: the registered
    models and, per (model, chart), the chart's corpus and view rows or why there are none."""

    models: pl.DataFrame
    chart_rows: dict[tuple[str, str], tuple[str, pl.DataFrame] | str]


def read_report_data(conn: duckdb.DuckDBPyConnection, specs: Iterable[ChartSpec] = CHARTS) -> ReportData:
    try:
        models = (
            conn.table("models")
            .select("model_id", "source", "model_type", "n_layers", "n_heads")
            .order("model_id")
            .pl()
        )
    except duckdb.CatalogException as error:
        raise ValueError("The warehouse has no models table: register a model first (`attn-warehouse run`).") from error
    chart_rows: dict[tuple[str, str], tuple[str, pl.DataFrame] | str] = {}
    for spec in specs:
        for model_id in models["model_id"]:
            try:
                found = spec.rows(conn, model_id)
            except duckdb.CatalogException:
                found = f"view {spec.view} is not in the warehouse yet; materialize warehouse_views"
            chart_rows[model_id, spec.name] = found or f"{spec.view} has no rows on {', '.join(spec.corpora)}"
    return ReportData(models, chart_rows)


def chart_png(spec: ChartSpec, corpus: str, rows: pl.DataFrame) -> bytes:
    """The chart drawn from its view rows, as PNG bytes."""
    buffer = io.BytesIO()
    spec.draw(rows, spec.title(rows, corpus)).save(buffer, format="png")
    return buffer.getvalue()


def headline_table(data: ReportData, headlines: Iterable[Headline], model_id: str) -> pl.DataFrame | None:
    """Per layer, one column per headline whose chart has rows for the model (None if none has)."""
    columns = []
    for headline in headlines:
        found = data.chart_rows.get((model_id, headline.chart))
        if not isinstance(found, tuple):
            continue
        corpus, rows = found
        rows = rows.filter(*(pl.col(column) == value for column, value in headline.where)) if headline.where else rows
        aggregate = getattr(pl.col(headline.column), headline.aggregate)()
        columns.append(rows.group_by("layer").agg(aggregate.alias(f"{headline.label} ({corpus})")))
    if not columns:
        return None
    table = columns[0]
    for column in columns[1:]:
        table = table.join(column, on="layer", how="full", coalesce=True)
    return table.sort("layer")


def _page(title: str, body: str, script: str = "") -> str:
    return (
        f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"<style>{_STYLE}</style></head>\n<body>\n{body}\n"
        + (f"<script>{script}</script>\n" if script else "")
        + "</body></html>\n"
    )


def _nav(papers: Iterable[str]) -> str:
    links = "".join(f'<a href="{paper}.html">{html.escape(paper.capitalize())}</a>' for paper in papers)
    return f'<nav><a href="index.html">Index</a>{links}</nav>'


def _html_table(table: pl.DataFrame) -> str:
    header = "".join(f"<th>{html.escape(name)}</th>" for name in table.columns)

    def cell(value):
        return "" if value is None else (f"{value:.3f}" if isinstance(value, float) else html.escape(str(value)))

    rows = "".join("<tr>" + "".join(f"<td>{cell(value)}</td>" for value in row) + "</tr>" for row in table.iter_rows())
    return f"<table><tr>{header}</tr>{rows}</table>"


def _missing_note(spec: ChartSpec, model_id: str, source: str, reason: str) -> str:
    command = shlex.join(
        ["attn-warehouse", "run", source, "--corpus", spec.corpora[0], *(["--hta"] if spec.analysis == "hta" else [])]
    )
    return (
        f'<p class="missing" data-chart="{html.escape(spec.name)}">{html.escape(spec.label)}: not materialized for '
        f"{html.escape(model_id)} ({html.escape(reason)}): run <code>{html.escape(command)}</code>, or materialize "
        f"<code>{html.escape(spec.name)}</code> for this partition in the UI"
        + (f" ({html.escape(spec.when_empty)})" if spec.when_empty else "")
        + ".</p>"
    )


def _chart_block(data: ReportData, spec: ChartSpec, model_id: str, source: str) -> str:
    found = data.chart_rows[model_id, spec.name]
    if isinstance(found, str):
        return _missing_note(spec, model_id, source, found)
    corpus, rows = found
    encoded = base64.b64encode(chart_png(spec, corpus, rows)).decode()
    return (
        f'<figure data-chart="{html.escape(spec.name)}">'
        f'<img alt="{html.escape(spec.label)}" src="data:image/png;base64,{encoded}">'
        f"<figcaption>{html.escape(spec.label)}: model <code>{html.escape(spec.source(rows))}</code>, "
        f"view <code>{html.escape(spec.view)}</code>, corpus {html.escape(corpus)}, "
        f"{rows.height} rows</figcaption></figure>"
    )


def paper_page(data: ReportData, paper: str, specs: list[ChartSpec], papers: list[str]) -> str:
    """One paper's page: a model selector and, per model, the headline table and every chart."""
    title = PAPER_TITLES.get(paper, paper.capitalize())
    parts = [_nav(papers), f"<h1>{html.escape(title)}</h1>"]
    models = data.models.select("model_id", "source")
    if not specs:
        parts.append(
            '<p class="missing">No chart of this paper is registered yet '
            "(CHARTS in dagster_project/presentation/chart_registry.py).</p>"
        )
        return _page(title, "\n".join(parts))
    if models.is_empty():
        parts.append('<p class="missing">No models in the warehouse: run <code>attn-warehouse run</code>.</p>')
        return _page(title, "\n".join(parts))
    options = "".join(
        f'<option value="{html.escape(model_id)}">{html.escape(source)}</option>'
        for model_id, source in models.iter_rows()
    )
    parts.append(f'<label>Model: <select id="model-select">{options}</select></label>')
    headlines = [headline for headline in HEADLINES if headline.chart in {spec.name for spec in specs}]
    for model_id, source in models.iter_rows():
        section = [f"<h2>{html.escape(source)}</h2>"]
        table = headline_table(data, headlines, model_id) if headlines else None
        if table is not None:
            section.append(f'<div class="headlines">{_html_table(table)}</div>')
        section.extend(_chart_block(data, spec, model_id, source) for spec in specs)
        parts.append(
            f'<section class="model" data-model="{html.escape(model_id)}">' + "\n".join(section) + "</section>"
        )
    return _page(title, "\n".join(parts), _SELECTOR_SCRIPT)


def index_page(papers: dict[str, list[ChartSpec]], models: pl.DataFrame) -> str:
    items = "".join(
        f'<li><a href="{paper}.html">{html.escape(PAPER_TITLES.get(paper, paper.capitalize()))}</a>: '
        f"{', '.join(html.escape(spec.label) for spec in specs) or 'no charts registered yet'}</li>"
        for paper, specs in papers.items()
    )
    model_table = (
        _html_table(models)
        if not models.is_empty()
        else "<p>No models in the warehouse: run <code>attn-warehouse run</code>.</p>"
    )
    body = f"{_nav(papers)}<h1>Attention warehouse report</h1><ul>{items}</ul><h2>Models</h2>{model_table}"
    return _page("Attention warehouse report", body)


def write_report(data: ReportData, out_dir: Path, specs: Iterable[ChartSpec] = CHARTS) -> list[Path]:
    """Write index.html and one <paper>.html per paper into `out_dir`; returns the pages."""
    papers = {paper: [] for paper in PAPER_TITLES} | charts_by_paper(specs)
    out_dir.mkdir(parents=True, exist_ok=True)
    pages = [out_dir / "index.html"]
    pages[0].write_text(index_page(papers, data.models))
    for paper, paper_specs in papers.items():
        page = out_dir / f"{paper}.html"
        page.write_text(paper_page(data, paper, paper_specs, list(papers)))
        pages.append(page)
    return pages
