"""What the report's pages show, read from the warehouse in one short visit: the registered models,
per (model, chart) the chart's view rows or why there are none, the models' display names and
what each lacks of a chart's needs, the examples behind each drawn chart, and per model the heads
its results name (HEAD_LINKS) with their kept example maps."""

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import polars as pl

from dagster_project.compute.attention_layouts import ATTENTION_LAYOUTS
from dagster_project.compute.clark.gradients import loss_name_for
from dagster_project.corpora import GLUE_TASKS
from dagster_project.presentation.chart_registry import (
    ATTENTION_LAYOUT,
    CHARTS,
    LOSS_HEAD,
    PRETRAINED,
    SECOND_MODEL,
    ChartSpec,
)
from dagster_project.presentation.charts.common import short_model_name
from dagster_project.presentation.consistency import facts_of_replaced_examples
from dagster_project.presentation.scorecard import matrix_rows, scorecard_rows


def _top(rows: pl.DataFrame, column: str, label: str, count: int = 1, where: pl.Expr | None = None) -> pl.DataFrame:
    """The `count` heads with the largest `column`, labelled."""
    rows = rows if where is None else rows.filter(where)
    return rows.sort(column, descending=True).head(count).select("corpus", "layer", "head", label=pl.lit(label))


# The heads a result names, per chart: from the chart's rows of one model, (corpus, layer, head,
# label) per head, the label saying what the result found the head to be.
HEAD_LINKS: dict[str, Callable[[pl.DataFrame], pl.DataFrame]] = {
    # a paper relation the corpus has no edge of is a row without a head
    "clark_table1_dependency_heads": lambda rows: rows.filter(pl.col("layer").is_not_null()).select(
        "corpus", "layer", "head", label=pl.format("best head for {} ({})", "relation", "direction")
    ),
    "clark_fig2_special_tokens": lambda rows: _top(rows, "to_sep", "most attention to [SEP]"),
    "clark_fig4_entropy": lambda rows: _top(rows, "entropy", "broadest attention: highest entropy"),
    "kovaleva_fig3_framenet_heads": lambda rows: _top(
        rows, "mean_max_attention", "attends along FrameNet links (above p99)", 5, pl.col("above_p99")
    ),
}


@dataclass(frozen=True)
class ExampleCount:
    """How many examples a drawn result of one (model, corpus) comes from, of how many the corpus has."""

    model_id: str
    corpus: str
    n: int
    total: int | None


@dataclass(frozen=True)
class ReportData:
    """What the pages show, read from the warehouse in one short visit: the registered
    models and, per (model, chart), the chart's corpus and view rows or why there are none;
    the models' display names and what each lacks of a chart's needs; per drawn chart, the
    examples behind it; per model, the heads its results name and their kept example maps."""

    models: pl.DataFrame
    chart_rows: dict[tuple[str, str], tuple[str, pl.DataFrame] | str]
    names: dict[str, str] = field(default_factory=dict)  # model_id -> short name
    lacks: dict[str, dict[str, str]] = field(default_factory=dict)  # model_id -> need -> how it lacks it
    counts: dict[tuple[str, str], list[ExampleCount]] = field(default_factory=dict)  # (model_id, chart)
    heads: dict[str, pl.DataFrame] = field(default_factory=dict)  # model_id -> chart, corpus, layer, head, label
    head_maps: dict[str, pl.DataFrame] = field(default_factory=dict)  # model_id -> maps with tokens
    profiles: dict[str, str] = field(default_factory=dict)  # model_id -> its last reproduction's profile
    scorecard: pl.DataFrame = field(default_factory=pl.DataFrame)  # reproduction_scorecard's rows
    matrix: pl.DataFrame = field(default_factory=pl.DataFrame)  # scorecard_matrix's rows
    # (model, corpus) pairs whose facts were computed from examples since replaced (presentation/consistency.py)
    replaced_examples: pl.DataFrame = field(default_factory=pl.DataFrame)

    def name(self, model_id: str) -> str:
        return self.names.get(model_id, model_id)


def finetuned_from(source: str) -> tuple[str, str] | None:
    """(base model key, GLUE task) of a checkpoint the fine-tuning asset saved, from its folder:
    models_cache/finetuned/<model_key>--<task> (compute/kovaleva/finetuning.py); else None."""
    path = Path(source)
    match = re.fullmatch(r"(.+)--([a-z0-9]+)", path.name)
    if path.parent.name != "finetuned" or match is None or match[2] not in GLUE_TASKS:
        return None
    return match[1], match[2]


def model_names(models: pl.DataFrame) -> dict[str, str]:
    """Short names for headings and menus: a hub id's or path's last part; a fine-tuned
    checkpoint as "<base> fine-tuned on <TASK>" (its base by its registered name where it is registered)."""
    sources = dict(zip(models["model_id"], models["source"], strict=True))
    names = {}
    for model_id, source in sources.items():
        tuned = finetuned_from(source)
        if tuned is None:
            names[model_id] = short_model_name(source)
            continue
        base, task = tuned
        base_name = short_model_name(sources[base]) if base in sources else base.split("--")[-1]
        names[model_id] = f"{base_name} fine-tuned on {GLUE_TASKS[task].tsv_folder}"
    return names


def _lacks_loss_head(conn: duckdb.DuckDBPyConnection, model_id: str, resolved_path: str) -> str | None:
    """How the model is known to have no masked-LM or classification head: its gradient pass
    wrote no rows, or its checkpoint's config names no such architecture; None if not known."""
    try:
        written = conn.execute(
            "SELECT sum(n_rows) FROM stg_batches WHERE table_name = 'grad_importance' AND model_id = ?", [model_id]
        ).fetchone()[0]
    except duckdb.CatalogException:  # no views yet
        written = None
    if written == 0:
        return "has none (its gradient pass found no loss head)"
    config_file = Path(resolved_path) / "config.json"
    if written is None and config_file.is_file():
        config = json.loads(config_file.read_text())
        architectures = config.get("architectures")
        if loss_name_for(architectures, len(config.get("id2label") or {0: "", 1: ""})) is None:
            return f"has none (its config's architectures: {', '.join(architectures or ['none'])})"
    return None


def model_lacks(conn: duckdb.DuckDBPyConnection, models: pl.DataFrame) -> dict[str, dict[str, str]]:
    """Per model, the chart needs (chart_registry.NEEDS) it is known to lack, each with how:
    read from the warehouse (models, the gradient pass's batches, the fine-tuning records) and
    the checkpoint's config where it is on this machine."""
    try:
        tuned_ids = set(conn.table("int_finetuned_models").pl()["tuned_model_id"])
    except duckdb.CatalogException:
        tuned_ids = set()
    lacks: dict[str, dict[str, str]] = {}
    for row in models.iter_rows(named=True):
        model_id, found = row["model_id"], {}
        if (loss := _lacks_loss_head(conn, model_id, row["resolved_path"])) is not None:
            found[LOSS_HEAD] = loss
        if model_id in tuned_ids or finetuned_from(row["source"]) is not None:
            found[PRETRAINED] = "is itself a fine-tuned checkpoint: its base model's section draws this"
        if row["model_type"] and row["model_type"] not in ATTENTION_LAYOUTS:
            found[ATTENTION_LAYOUT] = f"is a {row['model_type']} model, a family without one"
        if models.height < 2:
            found[SECOND_MODEL] = "is the only registered model"
        lacks[model_id] = found
    return lacks


def _examples_in(conn: duckdb.DuckDBPyConnection, table: str, model_id: str, corpus: str) -> int:
    """Distinct examples of (model, corpus) in a partitioned table's current batch."""
    query = (
        f"SELECT count(DISTINCT example_id) FROM {table} WHERE model_id = $model_id AND corpus = $corpus "
        "AND batch_id IN (SELECT batch_id FROM stg_batches "
        "WHERE table_name = $table AND model_id = $model_id AND corpus = $corpus)"
    )
    return conn.execute(query, {"model_id": model_id, "corpus": corpus, "table": table}).fetchone()[0]


def example_counts(
    conn: duckdb.DuckDBPyConnection, spec: ChartSpec, rows: pl.DataFrame, model_id: str
) -> list[ExampleCount]:
    """Per (model, corpus) the chart draws, the examples its numbers come from: the view's
    largest n_examples where it carries one, else the fewest of `spec.counted_from` that has
    rows; and the corpus's examples for that model."""
    if "model_id" not in rows.columns:
        rows = rows.with_columns(model_id=pl.lit(model_id))
    pairs = rows.select("model_id", "corpus").unique(maintain_order=True)
    if "n_examples" in rows.columns:
        carried = rows.group_by("model_id", "corpus").agg(pl.col("n_examples").max())
        carried = {(row[0], row[1]): row[2] for row in carried.iter_rows()}
    else:
        carried = {}
    counts = []
    for pair_model, corpus in pairs.iter_rows():
        n = carried.get((pair_model, corpus))
        if n is None:
            found = [_examples_in(conn, table, pair_model, corpus) for table in spec.counted_from]
            n = min((count for count in found if count), default=None)
        if n is not None:  # no count anywhere (facts without their examples): no n rather than a wrong one
            total = _examples_in(conn, "examples", pair_model, corpus) or None
            counts.append(ExampleCount(pair_model, corpus, int(n), total))
    return counts


def _head_maps(conn: duckdb.DuckDBPyConnection, model_id: str, heads: pl.DataFrame) -> pl.DataFrame:
    """Every kept example map of the named heads, on every corpus that kept maps, with the
    query's and key's token strings."""
    heads = heads.select("layer", "head").unique()
    query = """
        SELECT m.corpus, m.example_id, m.layer, m.head, m.query, m.key, m.attention,
               q.token AS query_token, k.token AS key_token
        FROM stg_head_example_maps AS m
        JOIN stg_tokens AS q
            ON q.model_id = m.model_id AND q.corpus = m.corpus AND q.example_id = m.example_id AND q.position = m.query
        JOIN stg_tokens AS k
            ON k.model_id = m.model_id AND k.corpus = m.corpus AND k.example_id = m.example_id AND k.position = m.key
        WHERE m.model_id = $model_id
            AND (m.layer, m.head) IN (SELECT (unnest($layers::SMALLINT[]), unnest($heads::SMALLINT[])))
        ORDER BY m.corpus, m.example_id, m.layer, m.head, m.query, m.key
    """
    parameters = {"model_id": model_id, "layers": heads["layer"].to_list(), "heads": heads["head"].to_list()}
    return conn.execute(query, parameters).pl()


def read_report_data(conn: duckdb.DuckDBPyConnection, specs: Iterable[ChartSpec] = CHARTS) -> ReportData:
    """Everything the pages of `specs` show, read from the warehouse (ReportData)."""
    try:
        models = (
            conn.table("models")
            .select("model_id", "source", "resolved_path", "model_type", "n_layers", "n_heads")
            .order("model_id")
            .pl()
        )
    except duckdb.CatalogException as error:
        raise ValueError("The warehouse has no models table: register a model first (`attn-warehouse run`).") from error
    names = model_names(models)
    chart_rows: dict[tuple[str, str], tuple[str, pl.DataFrame] | str] = {}
    counts: dict[tuple[str, str], list[ExampleCount]] = {}
    named: dict[str, list[pl.DataFrame]] = {}
    for spec in specs:
        for model_id in models["model_id"]:
            try:
                found = spec.rows(conn, model_id)
            except duckdb.CatalogException:
                found = f"view {spec.view} is not in the warehouse yet; materialize warehouse_views"
            chart_rows[model_id, spec.name] = found or f"{spec.view} has no rows on {', '.join(spec.corpora)}"
            if not found or isinstance(found, str):
                continue
            if spec.minimum.examples:  # charts of single examples' maps get no n
                counts[model_id, spec.name] = example_counts(conn, spec, found[1], model_id)
            if spec.name in HEAD_LINKS:
                own = found[1].filter(pl.col("model_id") == model_id) if "model_id" in found[1].columns else found[1]
                heads = HEAD_LINKS[spec.name](own).with_columns(chart=pl.lit(spec.name))
                named.setdefault(model_id, []).append(heads.cast({"layer": pl.Int64, "head": pl.Int64}))
    heads = {model_id: pl.concat(frames) for model_id, frames in named.items()}
    try:
        head_maps = {model_id: _head_maps(conn, model_id, frame) for model_id, frame in heads.items()}
    except duckdb.CatalogException:  # no views yet: the heads' pages say their maps are missing
        head_maps = {}
    try:
        profiles = dict(conn.execute("SELECT model_id, profile FROM stg_reproductions").fetchall())
    except duckdb.CatalogException:  # a warehouse from before reproductions were recorded
        profiles = {}
    try:
        scorecard = scorecard_rows(conn)
    except duckdb.CatalogException:  # views from before the claims: the index says to refresh them
        scorecard = pl.DataFrame()
    try:
        matrix = matrix_rows(conn)
    except duckdb.CatalogException:  # views from before the matrix: the index says to refresh them
        matrix = pl.DataFrame()
    return ReportData(
        models,
        chart_rows,
        names,
        model_lacks(conn, models),
        counts,
        heads,
        head_maps,
        profiles,
        scorecard,
        matrix,
        replaced_examples=facts_of_replaced_examples(conn),
    )
