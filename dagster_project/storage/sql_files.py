"""The catalogue of sql/'s files: the views of its layers in the order they read each other (the
staging views made from templates and the generated claim judgments among them), the aggregate
queries, and the hashes that say which SQL made a view or an aggregate."""

import functools
import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from graphlib import TopologicalSorter
from pathlib import Path

from dagster_project.settings import SQL_DIR
from dagster_project.storage.claims import CLAIMS_DIR, JUDGMENTS_VIEW, claim_files, judgments_sql, load_claims
from dagster_project.storage.schema import PARTITIONED_TABLES, WEIGHTED_TABLES, schema_files

VIEW_LAYERS = ("staging", "intermediate", "results")  # in the order they read each other, like dbt's layers

# Comments, string literals and quoted identifiers: the first two are blanked before looking for view names.
_SQL_COMMENTS_AND_QUOTES = re.compile(r"--[^\n]*|/\*.*?\*/|'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"", re.DOTALL)


def strip_sql_comments(sql: str) -> str:
    """SQL without its `--` and `/* */` comments, and with string literals emptied (`''`), so a
    name mentioned in a comment or a string is not read as a reference. Quoted identifiers stay."""

    def blank(match: re.Match[str]) -> str:
        text = match[0]
        return text if text.startswith('"') else "''" if text.startswith("'") else " "

    return _SQL_COMMENTS_AND_QUOTES.sub(blank, sql)


# Staging views written once as a template in sql/staging/templates and made for each table
# that has no file of its own in sql/staging: histogram tables from `histograms` with their
# kind, relation_hits (dense word lists, unnested) from `relation_hits`, every other partitioned
# table from `plain`. A template's {placeholders} are identifiers and constants of this registry,
# never user values: {view} the view's name, {table} the table's, {rows} a clause keeping some of
# its rows (empty: all of them).
STAGING_TEMPLATES: Mapping[str, tuple[str, Mapping[str, str]]] = {
    "position_histograms": ("histograms", {"kind": "attention"}),
    "contribution_histograms": ("histograms", {"kind": "contribution"}),
    "relation_hits": ("relation_hits", {}),
}
PLAIN_STAGING = "plain"
WEIGHTED_STAGING = "stg_weighted_"
# Per template, the clause of stg_<table> keeping a weighted table's attention rows: the histograms'
# comes after the window that spreads each example's pair counts, which any weighting's row may hold.
ATTENTION_ROWS = {
    PLAIN_STAGING: "    AND t.weighting = 'attention'",
    "histograms": "QUALIFY weighting = 'attention'",
    "relation_hits": "AND t.weighting = 'attention'",
}


def staged_table(view: str) -> str | None:
    """The table a staging view shows (stg_<table> and stg_weighted_<table>); None for another view."""
    if view.startswith(WEIGHTED_STAGING):
        return view.removeprefix(WEIGHTED_STAGING)
    return view.removeprefix("stg_") if view.startswith("stg_") else None


@dataclass(frozen=True)
class View:
    """One view of sql/: its name, layer (VIEW_LAYERS) and CREATE statement. `source` is its
    file, or for a staging view made from a template, the template."""

    name: str
    layer: str
    sql: str
    source: Path


def _templated_staging(sql_dir: Path, written: set[str]) -> list[View]:
    """Staging views from sql/staging/templates for the partitioned tables (PARTITIONED_TABLES: only
    the current tree has templates) with no file of their own."""
    templates = sql_dir / "staging" / "templates"
    if not templates.is_dir():  # an older tree's sql/, with a file for every staging view
        return []
    views = []
    for table in sorted(PARTITIONED_TABLES):
        template, values = STAGING_TEMPLATES.get(table, (PLAIN_STAGING, {}))
        source = templates / f"{template}.sql"
        weighted = table in WEIGHTED_TABLES
        for view, rows in (
            (f"stg_{table}", ATTENTION_ROWS[template] if weighted else ""),
            (f"{WEIGHTED_STAGING}{table}", ""),
        ):
            if view in written or (view.startswith(WEIGHTED_STAGING) and not weighted):
                continue
            sql = source.read_text().format(view=view, table=table, rows=rows, **values)
            views.append(View(view, "staging", sql, source))
    return views


def view_definitions(sql_dir: Path | None = None) -> list[View]:
    """Views of `sql_dir` (default sql/; another, e.g. an older commit's sql/ checked out
    elsewhere, for a comparison) in an order where every view comes after the views it reads:
    one per file of its layers, and the staging views made from templates.

    A view depends on another when the other's name appears as a word in its SQL, comments and
    string literals left out, the way dbt's ref() orders models, without a templating step.
    """
    sql_dir = sql_dir or SQL_DIR
    views: dict[str, View] = {}
    for layer in VIEW_LAYERS:
        for path in sorted((sql_dir / layer).glob("*.sql")):
            if path.stem in views:
                raise ValueError(f"view {path.stem} is defined twice: {views[path.stem].source} and {path}")
            views[path.stem] = View(path.stem, layer, path.read_text(), path)
    views |= {view.name: view for view in _templated_staging(sql_dir, set(views))}
    claims_dir = sql_dir / CLAIMS_DIR
    if claims_dir.is_dir():  # an older tree's sql/ has no claims
        views[JUDGMENTS_VIEW] = View(JUDGMENTS_VIEW, "results", judgments_sql(load_claims(sql_dir)), claims_dir)
    graph = {name: words_in(strip_sql_comments(view.sql)) & views.keys() - {name} for name, view in views.items()}
    return [views[name] for name in TopologicalSorter(graph).static_order()]


def words_in(code: str) -> set[str]:
    """The words of `code` (runs of letters, digits and underscores): a view name is one of them
    where it appears as a word, as the view names are words."""
    return set(re.findall(r"\w+", code))


def aggregate_files() -> list[Path]:
    """sql/aggregates: per aggregate table of sql/schema, the query that fills one (model_id, corpus) partition."""
    return sorted((SQL_DIR / "aggregates").glob("*.sql"))


def sql_code_version() -> str:
    """Hash of every SQL file, so a change to any view, table or aggregate marks the views stale."""
    digest = hashlib.sha256()
    for path in schema_files() + aggregate_files() + claim_files():
        digest.update(path.read_bytes())
    for view in view_definitions():
        digest.update(view.sql.encode())
    return digest.hexdigest()[:16]


def view_digest(view: View) -> str:
    """The digest of a view's SQL that apply_views marks the view with."""
    return hashlib.sha256(view.sql.encode()).hexdigest()[:16]


@functools.cache
def _view_code() -> dict[str, str]:
    return {view.name: strip_sql_comments(view.sql) for view in view_definitions()}


def views_reached(sql: str) -> frozenset[str]:
    """The views `sql` reads, directly or through the views it reads (by name, as
    view_definitions orders them)."""
    code = _view_code()

    def names_in(text: str) -> set[str]:
        return words_in(text) & code.keys()

    reached: set[str] = set()
    todo = names_in(strip_sql_comments(sql))
    while todo:
        name = todo.pop()
        reached.add(name)
        todo |= names_in(code[name]) - reached
    return frozenset(reached)
