"""The docs' numbers from data: a committed snapshot of one model's scorecard (docs/snapshot/:
scorecard.csv and snapshot.json saying which model, profile and code made it, and which steps ran on
part of their corpus), of every registered model's verdicts side by side (matrix.csv, the rows of
scorecard_matrix), and the generated blocks of the docs pages, rewritten from it; a block names the
steps on part of a corpus that its claims read. A page marks a block with

    <!-- snapshot: clark -->            every claim of a paper
    <!-- snapshot: clark Table 1 -->    the claims of one result of a paper
    <!-- snapshot: view compare_weightings_value_norms mean_norm -->   a column of a view's rows, as a table
    <!-- snapshot: matrix -->           every model's verdicts side by side, with the counts per model
    ...generated Markdown...
    <!-- /snapshot -->

tests/unit/test_docs_snapshot.py fails when a page's block differs from what the committed snapshot
renders. For the views of VIEW_TABLES it holds the model's rows (views/<view>.csv), which a `view`
block shows one column of; a view without rows in the snapshot is named with the run that fills it.
The snapshot also holds the model's charts (charts/<chart>.png, small palette PNGs), which
the result cards of the docs show (presentation/result_cards.py), and the matrix's chart
(scorecard_matrix.png, beside the CSVs: charts/ holds the registry's charts alone).

`python -m dagster_project.presentation.docs_snapshot` rewrites the blocks and the cards; with
`--model` it first exports that model's scorecard and charts from the configured warehouse into
the snapshot."""

import argparse
import html
import io
import json
import re
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import NamedTuple

import altair as alt
import duckdb
import polars as pl

from dagster_project.corpora import GLUE_TASKS
from dagster_project.presentation.catalogue import fill_command
from dagster_project.presentation.chart_registry import CHARTS, ChartSpec
from dagster_project.presentation.charts.compare import scorecard_matrix_chart
from dagster_project.presentation.result_cards import CHART_IMAGES, refresh_docs
from dagster_project.presentation.scorecard import (
    MATRIX_VIEW,
    markdown_table,
    matrix_columns,
    matrix_markdown,
    matrix_rows,
    scorecard_rows,
    summary_line,
)
from dagster_project.settings import PROJECT_ROOT
from dagster_project.storage.backend import WarehouseConfig
from dagster_project.storage.batches import partition_rows
from dagster_project.storage.claims import load_claims
from dagster_project.storage.sql_files import sql_code_version

DOCS_DIR = PROJECT_ROOT / "docs"
SNAPSHOT_DIR = DOCS_DIR / "snapshot"
SCORECARD_FILE = "scorecard.csv"
META_FILE = "snapshot.json"
MATRIX_FILE = "matrix.csv"
# The columns of scorecard_matrix the snapshot keeps: what the matrix's table, counts and chart read.
MATRIX_COLUMNS = {
    "paper": pl.String,
    "claim": pl.String,
    "claim_order": pl.Int64,
    "paper_text": pl.String,
    "model": pl.String,
    "model_id": pl.String,
    "profile": pl.String,
    "control_of": pl.String,
    "base_model_id": pl.String,
    "verdict": pl.String,
    "control_verdict": pl.String,
    "model_value": pl.Float64,
    "n": pl.Int64,
    "corpora": pl.String,
    "reason": pl.String,
}
MATRIX_IMAGE = "scorecard_matrix.png"
VIEWS_FOLDER = "views"
REGENERATE = "python -m dagster_project.presentation.docs_snapshot"
COLUMNS = ("paper", "result", "claim", "corpus", "paper_text", "model_value", "verdict", "reason", "n", "profile")
BLOCK = re.compile(r"(<!-- snapshot: (?P<key>[^>]+?) -->\n)(?P<body>.*?)(<!-- /snapshot -->)", re.DOTALL)


class ViewTable(NamedTuple):
    """How a block shows a view's rows: a table row per value of `index`, a column per value of `across`."""

    index: tuple[str, ...]
    across: str
    fills: str = ""  # the run that fills the view, where it is not its chart's (catalogue.fill_command)


# The views whose rows the snapshot keeps, for the tables of the compare page (a block names the column shown).
VIEW_TABLES = {
    "compare_weightings_special_tokens": ViewTable(("corpus", "layer"), "weighting"),
    "compare_weightings_value_norms": ViewTable(("corpus", "layer"), "token_class"),
    "compare_weightings_dependency_heads": ViewTable(
        ("corpus", "word_mode", "relation", "n", "baseline_accuracy"), "weighting"
    ),
    # rows of the checkpoints fine-tuned from the model, written by their own runs after the fine-tuning
    "compare_weightings_faithfulness": ViewTable(
        ("model", "corpus", "aggregation"), "weighting", "attn-warehouse run --corpus glue_sst2 --analysis finetuning"
    ),
    "compare_weightings_hta_agreement": ViewTable(("corpus", "aggregation", "layer"), "weighting"),
}
TUNED_MODELS = "SELECT tuned_model_id FROM int_finetuned_models WHERE base_model_id = ? ORDER BY tuned_model_id"
# Charts are flat colours and anti-aliased text: 64 colours keep them legible at a tenth of the bytes.
CHART_COLOURS = 64


def palette_png(chart: alt.TopLevelMixin) -> bytes:
    """`chart` as a PNG of at most CHART_COLOURS colours (a palette image), at Vega's own size."""
    from PIL import Image  # the docs extra: only a snapshot writes images

    buffer = io.BytesIO()
    chart.save(buffer, format="png")
    drawn = Image.open(io.BytesIO(buffer.getvalue())).convert("RGB")
    small = io.BytesIO()
    drawn.quantize(CHART_COLOURS, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE).save(
        small, format="PNG", optimize=True
    )
    return small.getvalue()


def write_chart_images(
    conn: duckdb.DuckDBPyConnection, model: str, folder: Path = CHART_IMAGES, charts: Iterable[ChartSpec] = CHARTS
) -> list[Path]:
    """Draw each of `charts` that has rows for `model` (hub id, path or model_id) into `folder` as
    <chart>.png, removing the images of those without rows; returns the images written."""
    model_id = scorecard_rows(conn, model)["model_id"][0]
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for spec in charts:
        path = folder / f"{spec.name}.png"
        found = spec.rows(conn, model_id)
        if found is None:
            path.unlink(missing_ok=True)
            continue
        corpus, rows = found
        path.write_bytes(palette_png(spec.draw(rows, spec.title(rows, corpus))))
        written.append(path)
    return written


# Where a reproduction ran a step on part of its corpus (run config max_examples, train_subset): the HTA
# examples and the fine-tuning's training examples, beside the corpus's examples. Values are parameters.
HTA_SUBSETS = (
    "SELECT h.corpus, count(DISTINCT h.example_id), (SELECT count(*) FROM stg_examples AS e "
    "WHERE e.model_id = h.model_id AND e.corpus = h.corpus) "
    "FROM stg_hta_correlations AS h WHERE h.model_id = ? GROUP BY h.model_id, h.corpus ORDER BY h.corpus"
)
FINETUNE_SUBSETS = (
    "SELECT s.task, max(s.steps), max(s.train_examples), (SELECT count(*) FROM stg_examples AS e "
    "WHERE e.model_id = s.model_id AND e.corpus = 'glue_' || s.task || '_train') "
    "FROM stg_task_scores AS s WHERE s.model_id = ? AND s.steps IS NOT NULL GROUP BY s.model_id, s.task ORDER BY s.task"
)


def reduced_sizes(conn: duckdb.DuckDBPyConnection, model_id: str) -> list[str]:
    """What the model's reproduction ran on part of its corpus, in words: HTA on fewer examples than
    the corpus holds, fine-tuning on fewer training examples than the task's train corpus."""
    sizes = [
        f"HTA on {used:,} of {held:,} {corpus} examples"
        for corpus, used, held in conn.execute(HTA_SUBSETS, [model_id]).fetchall()
        if used < held
    ]
    sizes += [
        f"{GLUE_TASKS[task].tsv_folder} fine-tuned for {steps:,} steps on {used:,} of {held:,} training examples"
        for task, steps, used, held in conn.execute(FINETUNE_SUBSETS, [model_id]).fetchall()
        if used < held
    ]
    return sizes


# A block names only the steps its claims rest on, so it reads back from each sentence of reduced_sizes the
# analysis, as a run names it (`--hta`, `--analysis finetuning`), and the corpus whose rows it fills (for a
# fine-tuning, the task's corpus glue_<task>, not its train corpus).
HTA_SENTENCE = re.compile(r"HTA on [\d,]+ of [\d,]+ (?P<corpus>\w+) examples")
FINETUNE_SENTENCE = re.compile(r"(?P<folder>\S+) fine-tuned for [\d,]+ steps on [\d,]+ of [\d,]+ training examples")
TASK_OF_FOLDER = {spec.tsv_folder: task for task, spec in GLUE_TASKS.items()}
EVERY_TASK = "glue"  # the corpus of a claim judged over every fine-tuned GLUE task together


def reduced_step(sentence: str) -> tuple[str, str]:
    """The analysis ("hta", "finetuning") and the corpus of a sentence of reduced_sizes."""
    if hta := HTA_SENTENCE.fullmatch(sentence):
        return "hta", hta["corpus"]
    if tuned := FINETUNE_SENTENCE.fullmatch(sentence):
        return "finetuning", f"glue_{TASK_OF_FOLDER[tuned['folder']]}"
    raise ValueError(
        f"{META_FILE}: {sentence!r} names no step on part of a corpus; rewrite it with `{REGENERATE} --model`"
    )


def reduced_sizes_of(rows: pl.DataFrame, sentences: Iterable[str]) -> list[str]:
    """The `sentences` of reduced_sizes that concern `rows`: a step of an analysis on a corpus concerns a row
    judged on that corpus (or, for a GLUE task's fine-tuning, on every GLUE task) whose claim needs the
    analysis (its `needs` names the run's `--hta` or `--analysis finetuning`)."""
    kept = []
    for sentence in sentences:
        analysis, corpus = reduced_step(sentence)
        asks = re.compile(rf"--(?:analysis\s+)?{analysis}\b")
        read = {corpus, EVERY_TASK} if analysis == "finetuning" else {corpus}
        if any(row["corpus"] in read and asks.search(row["needs"]) for row in rows.iter_rows(named=True)):
            kept.append(sentence)
    return kept


def write_snapshot(conn: duckdb.DuckDBPyConnection, model: str, folder: Path = SNAPSHOT_DIR) -> Path:
    """Export `model`'s scorecard into `folder` (the CSV and what made it: model, profile, date, SQL,
    and the steps run on part of their corpus); returns the CSV."""
    scored = scorecard_rows(conn, model)
    rows = scored.select(COLUMNS)
    folder.mkdir(parents=True, exist_ok=True)
    rows.write_csv(folder / SCORECARD_FILE)
    meta = {
        "model": model,
        "profile": rows["profile"][0],
        "made_at": datetime.now(UTC).strftime("%Y-%m-%d"),
        "sql_code_version": sql_code_version(),
        "reduced_sizes": reduced_sizes(conn, scored["model_id"][0]),
    }
    (folder / META_FILE).write_text(json.dumps(meta, indent=2) + "\n")
    write_view_rows(conn, scored["model_id"][0], folder / VIEWS_FOLDER)
    matrix_rows(conn).select(list(MATRIX_COLUMNS)).write_csv(folder / MATRIX_FILE)
    return folder / SCORECARD_FILE


def write_matrix_image(matrix: pl.DataFrame, folder: Path = SNAPSHOT_DIR) -> Path:
    """The matrix's chart (claims x models, coloured by verdict) of the snapshot's `matrix` rows into
    `folder` as MATRIX_IMAGE."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / MATRIX_IMAGE
    path.write_bytes(palette_png(scorecard_matrix_chart(matrix, "Scorecard")))
    return path


def write_view_rows(conn: duckdb.DuckDBPyConnection, model_id: str, folder: Path) -> list[Path]:
    """Export the rows of each view of VIEW_TABLES for `model_id` into `folder` as <view>.csv, and those of
    the models fine-tuned from it where the view's table has a row per model (a checkpoint's rows on its
    task's corpus would share the model's rows' labels), removing the files of views without rows;
    returns the files written."""
    tuned = [tuned for (tuned,) in conn.execute(TUNED_MODELS, [model_id]).fetchall()]
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for view, table in VIEW_TABLES.items():
        models = [model_id, *(tuned if "model" in table.index else [])]
        rows = pl.concat([partition_rows(conn, view, model) for model in models], how="vertical_relaxed")
        path = folder / f"{view}.csv"
        if rows.is_empty():
            path.unlink(missing_ok=True)
            continue
        rows.with_columns(pl.col(pl.Decimal).cast(pl.Float64)).write_csv(path)
        written.append(path)
    return written


def read_matrix(folder: Path = SNAPSHOT_DIR) -> pl.DataFrame:
    """The snapshot's rows of scorecard_matrix (MATRIX_COLUMNS)."""
    return pl.read_csv(folder / MATRIX_FILE, schema=MATRIX_COLUMNS)


def read_snapshot(folder: Path = SNAPSHOT_DIR) -> tuple[pl.DataFrame, dict]:
    """The snapshot's rows for the claims of the registry, in the registry's order, with each claim's
    `needs` (the run that fills the views it reads). A claim the snapshot has no row for (added after it
    was made) gets a `missing` row saying so and how to judge it, and a claim no longer in the registry
    is left out: the pages show every claim, and never a verdict the snapshot did not give."""
    judged = pl.read_csv(folder / SCORECARD_FILE, schema_overrides={"model_value": pl.Float64, "n": pl.Int64})
    meta = json.loads((folder / META_FILE).read_text())
    kept = {view: folder / VIEWS_FOLDER / f"{view}.csv" for view in VIEW_TABLES}
    meta["view_rows"] = {view: pl.read_csv(path) for view, path in kept.items() if path.exists()}
    if (folder / MATRIX_FILE).exists():
        meta["matrix_rows"] = read_matrix(folder)
    claims = load_claims()
    newer = [claim for claim in claims if claim.claim not in set(judged["claim"])]
    reason = f"not in the snapshot: the claim came after it was made (SQL {meta['sql_code_version']})"
    added = pl.DataFrame(
        {
            "paper": [claim.paper for claim in newer],
            "result": [claim.result for claim in newer],
            "claim": [claim.claim for claim in newer],
            "paper_text": [claim.paper_text for claim in newer],
            "verdict": "missing",
            "reason": reason,
            "profile": meta["profile"],
        },
        schema_overrides={"verdict": pl.String, "reason": pl.String, "profile": pl.String},
    )
    order = pl.DataFrame(
        {
            "claim": [claim.claim for claim in claims],
            "_order": range(len(claims)),
            "needs": [claim.needs for claim in claims],
        }
    )
    rows = (
        pl.concat([judged, added], how="diagonal_relaxed")
        .join(order, on="claim", how="inner", maintain_order="left")
        .sort("_order", maintain_order=True)
        .select(*COLUMNS, "needs")
    )
    return rows, meta | {"claims_after_snapshot": len(newer)}


def render_block(key: str, rows: pl.DataFrame, meta: dict) -> str:
    """The Markdown of a block: `key` is a paper ("clark"), a paper and a result ("clark Table 1"), or
    `view`, a view of VIEW_TABLES and one of its columns ("view compare_weightings_value_norms mean_norm")."""
    paper, _, result = key.partition(" ")
    if paper == "view":
        return render_view_table(*result.split(" "), meta)
    if paper == "matrix":
        return render_matrix(meta)
    chosen = rows.filter(pl.col("paper") == paper)
    if result:
        chosen = chosen.filter(pl.col("result") == result)
    if chosen.is_empty():
        return f"No claim of {key} in the snapshot.\n"
    partial = reduced_sizes_of(chosen, meta.get("reduced_sizes", ()))
    label = "quick reproduction (reduced sizes)" if meta["profile"] == "quick" else f"{meta['profile']} profile"
    lines = [
        f"{meta['model']}, {label}, {meta['made_at']}: {summary_line(chosen)} "
        f"(generated from docs/snapshot/ by `{REGENERATE}`).",
        *(
            [
                "",
                "The snapshot was made before the claims had intervals: its verdicts are those of the readings of "
                f"that time, and the {meta['claims_after_snapshot']} claims added since are missing until it is "
                f"regenerated from a fresh run (`{REGENERATE} --model {meta['model']}`).",
            ]
            if meta.get("claims_after_snapshot")
            else []
        ),
        "",
        *([f"On part of the data: {'; '.join(partial)}.", ""] if partial else []),
        verdict_table(chosen),
    ]
    return "\n".join(lines) + "\n"


def render_view_table(view: str, value: str, meta: dict) -> str:
    """The snapshot's rows of `view` as a Markdown table of its column `value`: a row per value of the view's
    row labels, a column per value of its column label (VIEW_TABLES), 3 decimals; or, where the snapshot
    has none of its rows, a line saying so and which runs fill them."""
    index, across, fills = VIEW_TABLES[view]
    rows = meta.get("view_rows", {}).get(view)
    source = f"generated from docs/snapshot/ by `{REGENERATE}`"
    if rows is None or rows.is_empty():
        fills = fills or fill_command(next(spec for spec in CHARTS if spec.view == view))
        return (
            f"*The docs snapshot ({meta['model']}, {meta['made_at']}) has no rows of `{view}`: its run did not fill "
            f"the view. `{fills}` fills it (with the run config the text above gives), and "
            f"`{REGENERATE} --model {meta['model']}` exports its rows into the snapshot and this table.*\n"
        )
    table = rows.pivot(on=across, index=list(index), values=value).sort(list(index), maintain_order=True)

    def cell(item: object) -> str:
        if isinstance(item, float):
            return f"{item:.3f}"
        return f"{item:,}" if isinstance(item, int) else str(item or "")

    return f"{meta['model']}, `{view}.{value}` per {across} ({source}):\n\n{markdown_table(table, cell)}\n"


def render_matrix(meta: dict) -> str:
    """The snapshot's matrix (`scorecard --matrix --format markdown`, compact for the content column):
    which models, a claims x models table of verdicts, and per model the count of each verdict and of
    the claims that hold for its random control too; or, where the snapshot has no matrix, a line
    saying how to export one."""
    rows = meta.get("matrix_rows")
    if rows is None or rows.is_empty():
        return (
            f"*The docs snapshot ({meta['model']}, {meta['made_at']}) has no matrix: "
            f"`{REGENERATE} --model {meta['model']}` exports `{MATRIX_VIEW}` with the model's scorecard.*\n"
        )
    lead = (
        f"{rows['claim'].n_unique()} claims x {len(matrix_columns(rows))} models, {meta['made_at']} "
        f"(generated from docs/snapshot/ by `{REGENERATE}`):"
    )
    return f"{lead}\n\n{matrix_markdown(rows, compact=True)}"


def verdict_table(rows: pl.DataFrame) -> str:
    """The judgments of `rows` as an HTML table a content column wide: per (claim, corpus) a row of
    the claim and its corpus, the verdict, MiniLM's value and the paper's, then the reason on a row of
    its own across the table, so that the longest text reads at the column's full width. Claim ids may
    break after an underscore."""
    lines = [
        "<table>",
        "<thead><tr><th>claim</th><th>verdict</th><th>MiniLM</th><th>paper (BERT-base)</th></tr></thead>",
    ]
    lines.append("<tbody>")
    for row in rows.iter_rows(named=True):
        claim = html.escape(row["claim"]).replace("_", "_<wbr>")
        corpus = f"<br><small>on {html.escape(row['corpus'])}</small>" if row["corpus"] else ""
        value = "" if row["model_value"] is None else f"{row['model_value']:.4g}"
        lines.append(
            f"<tr><td>{claim}{corpus}</td><td><strong>{html.escape(row['verdict'])}</strong></td>"
            f"<td>{value}</td><td>{html.escape(row['paper_text'] or '', quote=False)}</td></tr>"
        )
        lines.append(f'<tr><td colspan="4"><em>why</em>: {html.escape(row["reason"] or "", quote=False)}</td></tr>')
    lines += ["</tbody>", "</table>"]
    return "\n".join(lines)


def render_page(text: str, rows: pl.DataFrame, meta: dict) -> str:
    """`text` with every snapshot block rewritten from the snapshot."""
    return BLOCK.sub(lambda match: f"{match[1]}{render_block(match['key'], rows, meta)}{match[4]}", text)


def pages_with_blocks(docs_dir: Path = DOCS_DIR) -> list[Path]:
    return sorted(path for path in docs_dir.rglob("*.md") if BLOCK.search(path.read_text(encoding="utf-8")))


def refresh_pages(docs_dir: Path = DOCS_DIR, folder: Path = SNAPSHOT_DIR) -> list[Path]:
    """Rewrite every page's blocks from the snapshot; returns the pages that changed."""
    rows, meta = read_snapshot(folder)
    changed = []
    for page in pages_with_blocks(docs_dir):
        text = page.read_text(encoding="utf-8")
        rendered = render_page(text, rows, meta)
        if rendered != text:
            page.write_text(rendered, encoding="utf-8")
            changed.append(page)
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--model", help="export this model's scorecard and charts from the warehouse into the snapshot first"
    )
    args = parser.parse_args(argv)
    if args.model:
        with WarehouseConfig.from_env().connect_read_only() as conn:
            print(f"wrote {write_snapshot(conn, args.model)}")
            print(f"wrote {len(write_chart_images(conn, args.model))} charts into {CHART_IMAGES}")
        print(f"wrote {write_matrix_image(read_matrix())}")
    for page in dict.fromkeys([*refresh_pages(), *refresh_docs()]):
        print(f"rewrote {page.relative_to(PROJECT_ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
