"""The reproduction scorecard (sql/results/reproduction_scorecard.sql): every paper claim's verdict
per model, read from the warehouse and written as a terminal table, CSV, Markdown or the report's
HTML. The rows come from the view alone; this module only selects and formats them."""

import html
from collections.abc import Iterable

import duckdb
import polars as pl

SCORECARD_VIEW = "reproduction_scorecard"
FORMATS = ("table", "csv", "markdown")
# The columns a person reads, in reading order (the view has more: quote, chart, section, claim_order).
SHOWN = ("paper", "result", "claim", "corpus", "paper_text", "model_value", "verdict", "reason", "n", "profile")
VERDICT_ORDER = ("holds", "fails", "not comparable", "missing")


def scorecard_rows(conn: duckdb.DuckDBPyConnection, model: str | None = None, paper: str | None = None) -> pl.DataFrame:
    """The scorecard's rows, for one model (its hub id or path as registered, or its model_id) and
    one paper (clark, kovaleva, pascual) when given; ValueError naming the choices when none fits."""
    rows = conn.execute(f"SELECT * FROM {SCORECARD_VIEW}").pl()
    if model is not None:
        chosen = rows.filter((pl.col("model") == model) | (pl.col("model_id") == model))
        if chosen.is_empty():
            models = ", ".join(sorted(set(rows["model"]))) or "none registered"
            raise ValueError(f"no model {model!r} in the scorecard: its models are {models}")
        rows = chosen
    if paper is not None:
        key = paper.lower().split()[0]
        chosen = rows.filter(pl.col("paper") == key)
        if chosen.is_empty():
            papers = ", ".join(sorted(set(rows["paper"])))
            raise ValueError(f"no paper {paper!r} in the scorecard: its papers are {papers}")
        rows = chosen
    return rows


def verdict_counts(rows: pl.DataFrame) -> dict[str, int]:
    """How many (claim, corpus) judgments have each verdict, every verdict listed."""
    counts = dict(rows.group_by("verdict").len().iter_rows())
    return {verdict: counts.get(verdict, 0) for verdict in VERDICT_ORDER}


def summary_line(rows: pl.DataFrame) -> str:
    counts = verdict_counts(rows)
    return f"{rows['claim'].n_unique()} claims: " + ", ".join(f"{n} {verdict}" for verdict, n in counts.items())


def _shown(rows: pl.DataFrame) -> pl.DataFrame:
    return rows.select(SHOWN).with_columns(pl.col("model_value").round(4))


def format_scorecard(rows: pl.DataFrame, output: str) -> str:
    """The rows as `output`: table (one block per model), csv or markdown."""
    if output == "csv":
        return rows.drop("claim_order").write_csv()
    blocks = []
    for (model, profile), model_rows in rows.group_by(["model", "profile"], maintain_order=True):
        title = f"{model} ({profile} profile): {summary_line(model_rows)}"
        shown = _shown(model_rows).drop("profile")
        if output == "markdown":
            blocks.append(f"### {title}\n\n{markdown_table(shown)}")
        else:
            with pl.Config(
                tbl_rows=-1, tbl_cols=-1, tbl_width_chars=240, fmt_str_lengths=90, tbl_hide_dataframe_shape=True
            ):
                blocks.append(f"{title}\n{shown}")
    return "\n\n".join(blocks) + "\n"


def _cell(value: object) -> str:
    if value is None:
        return ""
    text = f"{value:.4g}" if isinstance(value, float) else str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_table(rows: pl.DataFrame) -> str:
    """`rows` as a Markdown table: floats to 4 significant digits, pipes escaped, NULL empty."""
    lines = ["| " + " | ".join(rows.columns) + " |", "|" + "---|" * len(rows.columns)]
    lines += ["| " + " | ".join(_cell(value) for value in row) + " |" for row in rows.iter_rows()]
    return "\n".join(lines)


def scorecard_html(rows: pl.DataFrame, chart_pages: dict[str, str], papers: Iterable[str]) -> str:
    """The report's scorecard for one model: a table per paper, each claim linking to the page and
    chart that draws its result (`chart_pages`: chart name -> page.html#anchor)."""
    parts = [f"<p>{html.escape(summary_line(rows))}</p>"]
    for paper in papers:
        paper_rows = rows.filter(pl.col("paper") == paper)
        if paper_rows.is_empty():
            continue
        body = []
        for row in paper_rows.iter_rows(named=True):
            link = chart_pages.get(row["chart"] or "")
            result = html.escape(row["result"])
            result = f'<a href="{link}">{result}</a>' if link else result
            value = "" if row["model_value"] is None else f"{row['model_value']:.4g}"
            body.append(
                f'<tr class="verdict-{row["verdict"].replace(" ", "-")}" data-claim="{row["claim"]}">'
                f'<td>{result}</td><td title="{html.escape(row["quote"])}">{html.escape(row["claim"])}</td>'
                f"<td>{html.escape(row['corpus'] or '')}</td><td>{html.escape(row['paper_text'])}</td>"
                f"<td>{value}</td><td><b>{html.escape(row['verdict'])}</b></td>"
                f'<td style="text-align:left">{html.escape(row["reason"])}</td></tr>'
            )
        parts.append(
            f"<h3>{html.escape(paper.capitalize())}: {html.escape(summary_line(paper_rows))}</h3>"
            '<table class="scorecard"><tr><th>result</th><th>claim</th><th>corpus</th><th>paper</th>'
            "<th>this model</th><th>verdict</th><th>why</th></tr>" + "".join(body) + "</table>"
        )
    return "\n".join(parts)
