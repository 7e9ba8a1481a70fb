"""A card per paper result, generated from the results catalogue (presentation/catalogue.py): one
link to each thing that makes the result, from the SQL view down to the compute functions, the
function that draws its chart, the tests, the run that fills it, and MiniLM's chart from the docs
snapshot (docs/snapshot/charts/, written by presentation/docs_snapshot.py); folded under it, the
view's SQL and the SQL that judges each of its claims.

docs/catalogue.md opens with a table of every result, then has every card, grouped by paper. Each
paper page section that describes a result carries its card between `<!-- card: CHART -->` and
`<!-- /card -->`; refresh_docs writes them (at the end of the section, in catalogue order), and
tests/unit/test_result_cards.py fails when a page differs from what it writes. Links to repository
files are relative paths, which GitHub follows and the docs site's hook (docs/hooks/github_view.py)
points at the repository host; links to functions go to their entries in the API pages (docs/api/<layer>.md)."""

import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from dagster_project.presentation.catalogue import CARD_BLOCK, DOCS_DIR, CatalogueRow, catalogue, heading_anchor
from dagster_project.presentation.chart_registry import PAPER_AUTHORS
from dagster_project.settings import PROJECT_ROOT
from dagster_project.storage.claims import Claim, load_claims

CATALOGUE_PAGE = "catalogue.md"
CHART_IMAGES = DOCS_DIR / "snapshot" / "charts"
SQL_FOLDER = PROJECT_ROOT / "sql"
# Per layer (a name's first part below dagster_project), the API page that documents its modules.
API_PAGES = {"compute": "api/compute.md", "presentation": "api/presentation.md", "storage": "api/storage.md"}
PAPER_TITLES = {
    "clark": "Clark et al. 2019",
    "kovaleva": "Kovaleva et al. 2019",
    "pascual": "Pascual et al. 2021",
    "compare": "Comparing models",
}


def _relative(target: Path, page: str) -> str:
    """The link from the docs page `page` (relative to docs/) to `target`, '/'-separated."""
    return Path(os.path.relpath(target, (DOCS_DIR / page).parent)).as_posix()


def _file_link(path: Path, page: str) -> str:
    return f"[`{path.relative_to(PROJECT_ROOT).as_posix()}`]({_relative(path, page)})"


def _api_link(name: str, page: str) -> str:
    """A link to the API entry of `name` ("compute.metrics.head_summaries"): mkdocstrings anchors
    each documented object at its full dotted path."""
    api_page = _relative(DOCS_DIR / API_PAGES[name.split(".")[0]], page)
    return f"[`{name}`]({api_page}#dagster_project.{name})"


def result_title(row: CatalogueRow) -> str:
    """The result as its paper names it, "Clark et al. Fig. 2"; a comparison by its chart's name
    ("Models compared: Fig. 2" would say nothing)."""
    return f"{PAPER_AUTHORS[row.paper]} {row.result}" if row.paper != "compare" else f"`{row.chart}`"


def catalogue_anchor(row: CatalogueRow) -> str:
    """The anchor of the row's card on the catalogue page (the slug of its heading)."""
    return heading_anchor(f"{row.result} {row.chart}")


def tests_cell(row: CatalogueRow, page: str) -> str:
    """The card's tests: the view's own test first, then the others that name the view."""
    others = ", ".join(_file_link(PROJECT_ROOT / name, page) for name in row.tests if name != row.own_test)
    if not row.own_test:
        return f"none of its own in `tests/views`; named by {others}"
    own = f"its own: {_file_link(PROJECT_ROOT / row.own_test, page)}"
    return f"{own}; also named by {others}" if others else own


def _indented(text: str) -> list[str]:
    """`text` as lines of an admonition's body (four spaces in, blank lines left blank)."""
    return [f"    {line}".rstrip() for line in text.strip().splitlines()]


def sql_blocks(row: CatalogueRow) -> list[str]:
    """The card's code, folded (pymdownx.details): the view's SQL file, and the judges of the claims
    that read the result (the claims whose chart is the card's, storage/claims.py); of claims made
    from one registry entry (`each`), one judge, the others named: they differ only in its values."""
    view_sql = (SQL_FOLDER / "results" / f"{row.view}.sql").read_text(encoding="utf-8")
    lines = [f'??? abstract "SQL of the view `{row.view}`"', "", *_indented(f"```sql\n{view_sql}\n```"), ""]
    entries: dict[str, list[Claim]] = {}
    for claim in load_claims():
        if row.chart and claim.chart == row.chart:
            entries.setdefault(claim.template, []).append(claim)
    if not entries:
        return lines
    claims = sum(len(made) for made in entries.values())
    judged = "the claim" if claims == 1 else f"its {claims} claims"
    lines += [f'??? abstract "SQL that judges {judged} (the scorecard\'s verdicts)"', ""]
    for template, (first, *others) in entries.items():
        named = f"`{first.claim}`"
        if others:
            named += (
                f"; {', '.join(f'`{claim.claim}`' for claim in others)} are made from the same registry entry"
                f" (`{template}`) with other values"
            )
        lines += [f"    {named}", "", *_indented(f"```sql\n{first.judge}\n```"), ""]
    return lines


def card_markdown(row: CatalogueRow, page: str) -> str:
    """The card of `row` as it appears on the docs page `page` (relative to docs/): on the
    catalogue it links to the paper page's section, on a paper page to the catalogue."""

    def files(folder: str, names: Iterable[str]) -> str:
        return ", ".join(_file_link(SQL_FOLDER / folder / f"{name}.sql", page) for name in names)

    if page == CATALOGUE_PAGE:
        section, anchor = row.docs.partition("#")[::2]
        other = f"{_relative(DOCS_DIR / section, page)}#{anchor}"
        where = f"[{PAPER_TITLES[row.paper]}, the section that describes it]({other})"
    else:
        other = f"{_relative(DOCS_DIR / CATALOGUE_PAGE, page)}#{catalogue_anchor(row)}"
        where = f"[this result in the catalogue]({other})"
    lines = [
        f"**{result_title(row)}, from the chart to the math** ({where})",
        "",
        "| | |",
        "|---|---|",
        f"| view | {files('results', [row.view])} |",
        f"| aggregates | {files('aggregates', row.aggregates) or 'none: the view reads the facts'} |",
        f"| facts | {files('schema', row.facts)} |",
        f"| compute | {', '.join(_api_link(name, page) for name in row.compute)} |",
        f"| chart | `{row.chart}`, drawn by {_api_link(row.chart_function, page)} |",
        f"| tests | {tests_cell(row, page)} |",
        f"| fill it | `{row.command}` |",
        "",
        *sql_blocks(row),
    ]
    image = CHART_IMAGES / f"{row.chart}.png"
    if image.exists():
        # the page shrinks a wide chart to the column; a click opens it at its own size
        picture = _relative(image, page)
        lines.append(f"[![MiniLM, {result_title(row).strip('`')}]({picture})]({picture})")
    else:
        lines.append("*No MiniLM chart in the docs snapshot: its run had no rows for this view.*")
    return "\n".join(lines) + "\n"


def catalogue_markdown(rows: Sequence[CatalogueRow]) -> str:
    """The catalogue page: a table of every result in the rows' order, each linking to its card, then
    every card, grouped by paper in the order of PAPER_AUTHORS."""
    lines = [
        "# Results catalogue",
        "",
        "Generated by `attn-warehouse catalogue --write-docs` from the chart registry, the SQL views and",
        "the fact kinds; `tests/unit/test_result_cards.py` fails when this page or a paper page's card",
        "is not current, and when a link of a card leads nowhere. Read a card top down to go from a",
        "paper's figure to the math behind it: the chart asset draws the view; the view reads the",
        "aggregates (materialized per model and corpus) and the staged fact tables; the compute",
        "functions produce those facts. Each picture is MiniLM's, from the",
        "[docs snapshot](papers/scorecard.md); a click opens it at full size. Each card names the view's",
        "own test (in `tests/views`) before the other tests that name the view, and folds the view's SQL",
        "and the SQL that judges the claims read from it.",
        "",
        "## Every result",
        "",
        "By paper; in a paper, the figures by number, then the tables, sections and appendices by number,",
        "then what the paper does not number. Each result links to its card.",
        "",
        "| paper | result | view |",
        "|---|---|---|",
        *(f"| {PAPER_TITLES[row.paper]} | [{row.result}](#{catalogue_anchor(row)}) | `{row.view}` |" for row in rows),
        "",
    ]
    for paper in PAPER_AUTHORS:
        lines += [f"## {PAPER_TITLES[paper]}", ""]
        for row in (row for row in rows if row.paper == paper):
            lines += [f"### {row.result} `{row.chart}`", "", card_markdown(row, CATALOGUE_PAGE)]
    return "\n".join(lines).rstrip("\n") + "\n"


def page_with_cards(text: str, page: str, rows: Sequence[CatalogueRow]) -> str:
    """The paper page `text` (at `page`) with the card of each row it describes at the end of that
    row's section, in catalogue order, and no other card."""
    sections = re.split(r"(?m)^(?=## )", CARD_BLOCK.sub("", text))
    rendered = []
    for section in sections:
        heading = section.partition("\n")[0]
        anchor = heading_anchor(heading[3:]) if heading.startswith("## ") else ""
        cards = [
            f"<!-- card: {row.chart} -->\n{card_markdown(row, page)}<!-- /card -->\n"
            for row in rows
            if anchor and row.docs == f"{page}#{anchor}"
        ]
        rendered.append(section.rstrip("\n") + "\n" + "".join(f"\n{card}" for card in cards))
    return "\n".join(rendered)


def refresh_docs(rows: Sequence[CatalogueRow] | None = None) -> list[Path]:
    """Write the catalogue page and every paper page's cards; returns the pages that changed."""
    rows = catalogue() if rows is None else rows
    wanted = {DOCS_DIR / CATALOGUE_PAGE: catalogue_markdown(rows)}
    for path in sorted((DOCS_DIR / "papers").glob("*.md")):
        page = path.relative_to(DOCS_DIR).as_posix()
        wanted[path] = page_with_cards(path.read_text(encoding="utf-8"), page, rows)
    changed = [path for path, text in wanted.items() if not path.exists() or path.read_text(encoding="utf-8") != text]
    for path in changed:
        path.write_text(wanted[path], encoding="utf-8")
    return changed
