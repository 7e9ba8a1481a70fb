"""The reproduction scorecard (sql/results/reproduction_scorecard.sql): every paper claim's verdict
per model, read from the warehouse and written as a terminal table, CSV, Markdown or the report's
HTML; and the matrix of every model side by side (sql/results/scorecard_matrix.sql), as a terminal
table, CSV, Markdown or the report's HTML table. The rows come from the views alone; this module
only selects and formats them."""

import html
import textwrap
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import duckdb
import polars as pl

from dagster_project.compute.controls import DEFAULT_SEED, parse_random_init
from dagster_project.presentation.charts.common import short_model_name

SCORECARD_VIEW = "reproduction_scorecard"
FORMATS = ("table", "csv", "markdown")
# The columns a person reads, in reading order (the view has more: quote, chart, section, claim_order).
SHOWN = (
    "paper",
    "result",
    "claim",
    "corpus",
    "paper_text",
    "model_value",
    "value_low",
    "value_high",
    "verdict",
    "control_verdict",
    "reason",
    "n",
    "profile",
)
VERDICT_ORDER = ("holds", "fails", "inconclusive", "not comparable", "missing")


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
    """How many claims, how many judgments have each verdict and, for a model with a random-weights
    control, how many of its findings hold for the control too."""
    counts = verdict_counts(rows)
    claims = rows["claim"].n_unique()
    # a claim judged on several corpora (one per GLUE task, per language) is several judgments
    judged = f"{claims} claims" if rows.height == claims else f"{claims} claims in {rows.height} judgments"
    line = f"{judged}: " + ", ".join(f"{n} {verdict}" for verdict, n in counts.items())
    if "control_verdict" in rows.columns and rows["control_verdict"].is_not_null().any():
        line += f"; {rows['holds_for_control'].sum()} hold for its random-init control too"
    return line


def _shown(rows: pl.DataFrame) -> pl.DataFrame:
    shown = [column for column in SHOWN if column in rows.columns]
    return rows.select(shown).with_columns(pl.col("model_value", "value_low", "value_high").round(4))


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


def markdown_table(rows: pl.DataFrame, cell: Callable[[object], str] = _cell) -> str:
    """`rows` as a Markdown table, each value written by `cell` (by default: floats to 4 significant
    digits, pipes escaped, NULL empty)."""
    lines = ["| " + " | ".join(rows.columns) + " |", "|" + "---|" * len(rows.columns)]
    lines += ["| " + " | ".join(cell(value) for value in row) + " |" for row in rows.iter_rows()]
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


# The matrix (sql/results/scorecard_matrix.sql): one verdict per (claim, model), every model side by side.
MATRIX_VIEW = "scorecard_matrix"
# The matrix's verdicts in the order its counts list them; `mixed`: the corpora that judged the claim disagree.
MATRIX_VERDICTS = ("holds", "fails", "inconclusive", "not comparable", "mixed", "missing")
# A fixed colour per verdict, the same in the report's matrix table and its chart.
VERDICT_COLOURS = {
    "holds": "#1a7f37",
    "fails": "#c0392b",
    "inconclusive": "#e6a700",
    "not comparable": "#8c8c8c",
    "mixed": "#7b52ab",
    "missing": "#e3e3e3",
}
# What a terminal cell shows per verdict, and what each mark means (the legend).
VERDICT_MARKS = {
    "holds": "holds",
    "fails": "fails",
    "inconclusive": "incon",
    "not comparable": "n/c",
    "mixed": "mixed",
    "missing": "-",
}
# Each mark as a legend says it: "incon = inconclusive", a mark that is its verdict alone.
MARK_LEGEND = {verdict: mark if mark == verdict else f"{mark} = {verdict}" for verdict, mark in VERDICT_MARKS.items()}
VERDICT_MEANINGS = {
    "holds": "the model shows the finding",
    "fails": "it does not",
    "inconclusive": "the interval straddles the paper's threshold",
    "not comparable": "the finding does not apply to the model",
    "mixed": "the corpora that judged it disagree",
    "missing": "no rows to judge it",
}
HOLDS_FOR_CONTROL = "holds for its random control too"
MATRIX_WIDTH = 120  # the terminal table's width: the claim column gives way to the models'


@dataclass(frozen=True)
class MatrixColumn:
    """One model's column of the matrix: `key` heads it in the terminal ("1", and "1r" for that
    model's random-init control), `heading` in Markdown, the report and the chart, `about` says which
    model it is."""

    model_id: str
    key: str
    label: str  # the model's short name (charts.common.short_model_name)
    about: str
    is_control: bool

    @property
    def heading(self) -> str:
        """The key and the short name: "1r all-MiniLM-L6-v2 (random init)" (short names may repeat, keys do not)."""
        return f"{self.key} {self.label}"


def matrix_rows(conn: duckdb.DuckDBPyConnection, paper: str | None = None) -> pl.DataFrame:
    """The matrix's rows (one per claim and model, in the view's column order), of one paper when
    given; ValueError naming the papers when it has no claim."""
    rows = conn.execute(f"SELECT * FROM {MATRIX_VIEW}").pl()
    if paper is not None:
        chosen = rows.filter(pl.col("paper") == paper.lower().split()[0])
        if chosen.is_empty():
            raise ValueError(
                f"no paper {paper!r} in the scorecard: its papers are {', '.join(sorted(set(rows['paper'])))}"
            )
        rows = chosen
    return rows


def matrix_columns(rows: pl.DataFrame) -> list[MatrixColumn]:
    """The models of the matrix's rows as columns, in the view's order (a model's random-init controls
    right after it): models numbered from 1, a control keyed by its base's number and "r", and its
    seed where that is not 0 ("1r", "1r5"); the controls of a base that has no column share a number
    of their own."""
    models = rows.select("model_id", "model", "profile", "control_of", "base_model_id").unique(
        "model_id", maintain_order=True
    )
    columns: list[MatrixColumn] = []
    numbers: dict[str, str] = {}  # model source -> its column's number
    for model_id, model, profile, control_of, base_model_id in models.iter_rows():
        label = short_model_name(model)
        if control_of is None:
            numbers[model] = str(len(numbers) + 1)
            columns.append(MatrixColumn(model_id, numbers[model], label, f"{model}, {profile} profile", False))
            continue
        base = f"{numbers[control_of]} ({control_of})" if control_of in numbers else control_of
        if base_model_id is None:
            base += " (not registered)"
        number = numbers.setdefault(control_of, str(len(numbers) + 1))
        seed = parse_random_init(model).seed
        key = f"{number}r" + (str(seed) if seed != DEFAULT_SEED else "")
        seeded = f", seed {seed}" if seed != DEFAULT_SEED else ""
        columns.append(
            MatrixColumn(model_id, key, label, f"random-init control of {base}{seeded}, {profile} profile", True)
        )
    return columns


def matrix_counts(rows: pl.DataFrame, columns: list[MatrixColumn]) -> dict[str, dict[str, int | None]]:
    """Per model_id, how many claims have each verdict (MATRIX_VERDICTS) and how many hold for the
    model and for its random control too (None without a registered control)."""
    counts = {}
    for column in columns:
        own = rows.filter(pl.col("model_id") == column.model_id)
        found = dict(own.group_by("verdict").len().iter_rows())
        with_control = own.filter(pl.col("control_verdict").is_not_null())
        both = own.filter((pl.col("verdict") == "holds") & (pl.col("control_verdict") == "holds")).height
        counts[column.model_id] = {verdict: found.get(verdict, 0) for verdict in MATRIX_VERDICTS} | {
            HOLDS_FOR_CONTROL: both if not with_control.is_empty() else None
        }
    return counts


def matrix_table(rows: pl.DataFrame, columns: list[MatrixColumn], header: str = "key") -> pl.DataFrame:
    """Claims as rows (paper, claim), models as columns headed by `header` (a MatrixColumn attribute:
    key, heading, model_id), each cell its verdict."""
    claims = rows.select("claim_order", "paper", "claim").unique("claim").sort("claim_order")
    verdicts = rows.pivot(on="model_id", index="claim", values="verdict")
    names = {column.model_id: getattr(column, header) for column in columns}
    return claims.join(verdicts, on="claim", how="left").select(
        "paper", "claim", *(pl.col(column.model_id).alias(names[column.model_id]) for column in columns)
    )


def _wrapped(text: str, width: int, indent: str) -> str:
    return textwrap.fill(text, width, subsequent_indent=indent, break_on_hyphens=False)


def matrix_text(rows: pl.DataFrame, width: int = MATRIX_WIDTH) -> str:
    """The matrix as a terminal table `width` wide: the models keyed 1, 1r (its random control), 2, ...
    with a legend, one line per claim under its paper (an id too long for its column on a line of its
    own, its cells on the next), per model the count of each verdict and of the claims that hold for
    its random control too, and the mixed cells' corpora."""
    columns = matrix_columns(rows)
    table = matrix_table(rows, columns)
    cell = max(max(len(mark) for mark in VERDICT_MARKS.values()), *(len(column.key) for column in columns)) + 2
    longest = max(len(HOLDS_FOR_CONTROL), table["claim"].str.len_chars().max())
    claim_width = max(24, min(longest, width - 3 - cell * len(columns)))

    def line(label: str, cells: Iterable[str]) -> str:
        shown = "".join(f"{text:<{cell}}" for text in cells).rstrip()
        if len(label) > claim_width:
            return f"  {label}\n  {'':<{claim_width}} {shown}"
        return f"  {label:<{claim_width}} {shown}"

    title = f"{table.height} claims x {len(columns)} models (scorecard_matrix): one verdict per claim and model"
    lines = [_wrapped(title, width, "  ")]
    lines += [_wrapped(f"  {column.key:<4}{column.label}: {column.about}", width, " " * 6) for column in columns]
    marks = dict(MARK_LEGEND)
    marks["mixed"] += f" ({VERDICT_MEANINGS['mixed']}, listed below)"
    lines += [_wrapped("verdicts: " + " | ".join(marks[verdict] for verdict in MATRIX_VERDICTS), width, "  ")]
    lines += ["", line("claim", (column.key for column in columns))]
    for (paper,), claims in table.partition_by("paper", as_dict=True, maintain_order=True).items():
        lines.append(paper)
        lines += [
            line(claim, (VERDICT_MARKS[verdict] for verdict in verdicts))
            for claim, *verdicts in claims.drop("paper").iter_rows()
        ]
    counts = matrix_counts(rows, columns)
    lines.append("per model")
    for what in (*MATRIX_VERDICTS, HOLDS_FOR_CONTROL):
        lines.append(
            line(
                what,
                (
                    "-" if counts[column.model_id][what] is None else str(counts[column.model_id][what])
                    for column in columns
                ),
            )
        )
    mixed = rows.filter(pl.col("verdict") == "mixed")
    if not mixed.is_empty():
        keys = {column.model_id: column.key for column in columns}
        lines += ["", _wrapped(f"mixed: {VERDICT_MEANINGS['mixed']}", width, "  ")]
        lines += [
            _wrapped(f"  {keys[model_id]:<4}{claim}: {corpora}", width, " " * 6)
            for model_id, claim, corpora in mixed.select("model_id", "claim", "corpora").iter_rows()
        ]
    return "\n".join(lines) + "\n"


def format_matrix(rows: pl.DataFrame, output: str) -> str:
    """The matrix as `output`: table (matrix_text), csv (the view's rows) or markdown (a claims x
    models table headed by the models' labels, then the per-model counts)."""
    if output == "csv":
        return rows.drop("claim_order").write_csv()
    if output == "table":
        return matrix_text(rows)
    return matrix_markdown(rows)


def matrix_markdown(rows: pl.DataFrame, compact: bool = False) -> str:
    """The matrix in Markdown: which model each column is, a claims x models table of verdicts, then the
    per-model counts. compact, for a page's content column: the columns headed by their keys (1, 1r),
    the cells by their marks (incon, n/c, -) with a line saying what each means, no paper column (a
    claim id starts with its paper), claim ids that may break after an underscore (HTML <wbr>)."""
    columns = matrix_columns(rows)
    counts = matrix_counts(rows, columns)
    header = "key" if compact else "heading"
    about = "\n".join(f"- **{column.heading}**: {column.about}" for column in columns)
    table = matrix_table(rows, columns, header)
    if compact:
        keys = [column.key for column in columns]
        table = table.drop("paper").with_columns(
            pl.col("claim").str.replace_all("_", "_<wbr>", literal=True),  # a long id may break after an underscore
            *(pl.col(key).replace_strict(VERDICT_MARKS) for key in keys),
        )
        about += f"\n\nVerdicts: {', '.join(MARK_LEGEND.values())}."
    per_model = pl.DataFrame(
        {"": [*MATRIX_VERDICTS, HOLDS_FOR_CONTROL]}
        | {
            getattr(column, header): [counts[column.model_id][what] for what in (*MATRIX_VERDICTS, HOLDS_FOR_CONTROL)]
            for column in columns
        }
    )
    return f"{about}\n\n{markdown_table(table)}\n\n{markdown_table(per_model)}\n"


def matrix_html(rows: pl.DataFrame) -> str:
    """The matrix as an HTML table for the report: a column per model (hover its head for which model),
    a row per claim under its paper, each cell coloured by its verdict (hover it for the reason and the
    corpora), the per-model counts at the foot."""
    columns = matrix_columns(rows)
    reasons = {
        (row["claim"], row["model_id"]): (row["reason"] + (f" [{row['corpora']}]" if row["n_corpora"] > 1 else ""))
        for row in rows.select("claim", "model_id", "reason", "corpora", "n_corpora").iter_rows(named=True)
    }
    header = "".join(
        f'<th title="{html.escape(column.about)}">{html.escape(column.heading)}</th>' for column in columns
    )
    body = []
    table = matrix_table(rows, columns, "model_id")
    for (paper,), claims in table.partition_by("paper", as_dict=True, maintain_order=True).items():
        body.append(f'<tr><th colspan="{len(columns) + 1}">{html.escape(paper.capitalize())}</th></tr>')
        for claim, *verdicts in claims.drop("paper").iter_rows():
            cells = "".join(
                f'<td class="verdict-{verdict.replace(" ", "-")}" data-model="{html.escape(column.model_id)}" '
                f'style="background:{VERDICT_COLOURS[verdict]};color:{"#222" if verdict == "missing" else "#fff"}" '
                f'title="{html.escape(reasons[claim, column.model_id])}">{html.escape(VERDICT_MARKS[verdict])}</td>'
                for column, verdict in zip(columns, verdicts, strict=True)
            )
            body.append(f'<tr data-claim="{html.escape(claim)}"><td>{html.escape(claim)}</td>{cells}</tr>')
    counts = matrix_counts(rows, columns)
    foot = "".join(
        f"<tr><th>{html.escape(what)}</th>"
        + "".join(
            f"<td>{'-' if counts[column.model_id][what] is None else counts[column.model_id][what]}</td>"
            for column in columns
        )
        + "</tr>"
        for what in (*MATRIX_VERDICTS, HOLDS_FOR_CONTROL)
    )
    return f'<table class="matrix"><tr><th>claim</th>{header}</tr>{"".join(body)}{foot}</table>'
