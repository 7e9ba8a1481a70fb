"""The result cards (presentation/result_cards.py): the catalogue page and every paper page's cards
are current, every card has a link to each thing that makes its result, and every link leads to
something: a repository file, a heading of the catalogue, a documented function in an API page
and, in the built site, that function's anchor and the repository host."""

import importlib
import re
from pathlib import Path

import pytest

from dagster_project.cli import main
from dagster_project.presentation.catalogue import CARD_BLOCK, catalogue, heading_anchor
from dagster_project.presentation.result_cards import (
    API_PAGES,
    CATALOGUE_PAGE,
    CHART_IMAGES,
    card_markdown,
    catalogue_markdown,
    page_with_cards,
    sql_blocks,
)
from dagster_project.settings import PROJECT_ROOT
from dagster_project.storage.claims import load_claims

ROWS = catalogue()
DOCS = PROJECT_ROOT / "docs"
PAPER_PAGES = sorted(path.relative_to(DOCS).as_posix() for path in (DOCS / "papers").glob("*.md"))
LINK = re.compile(r"\]\(([^()\s#]+)(?:#([^()\s]*))?\)")
STALE = "stale: .venv/bin/attn-warehouse catalogue --write-docs"


def _cards(page: str) -> dict[str, str]:
    """The card blocks of a docs page, by chart."""
    return {match["chart"]: match["body"] for match in CARD_BLOCK.finditer((DOCS / page).read_text(encoding="utf-8"))}


def test_the_catalogue_page_is_current() -> None:
    assert (DOCS / CATALOGUE_PAGE).read_text(encoding="utf-8") == catalogue_markdown(ROWS), STALE


@pytest.mark.parametrize("page", PAPER_PAGES)
def test_every_paper_page_carries_its_current_cards(page: str) -> None:
    text = (DOCS / page).read_text(encoding="utf-8")
    assert text == page_with_cards(text, page, ROWS), f"{page} is {STALE}"


def test_every_card_sits_in_the_section_that_describes_its_result() -> None:
    placed = {}
    for page in PAPER_PAGES:
        anchor = ""
        for line in (DOCS / page).read_text(encoding="utf-8").splitlines():
            if line.startswith("## "):
                anchor = heading_anchor(line[3:])
            if found := re.fullmatch(r"<!-- card: (\w+) -->", line):
                placed[found[1]] = f"{page}#{anchor}"
    assert placed == {row.chart: row.docs for row in ROWS}


@pytest.mark.slow  # the CLI's parser imports every verb's modules, the Dagster definitions among them
def test_the_command_prints_the_page_and_leaves_current_docs_alone(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("dagster_project.presentation.catalogue.catalogue", lambda: ROWS)  # built once, above
    assert main(["catalogue", "--markdown"]) == 0
    assert capsys.readouterr().out == (DOCS / CATALOGUE_PAGE).read_text(encoding="utf-8")
    before = {path: path.stat().st_mtime_ns for path in [DOCS / CATALOGUE_PAGE, *(DOCS / "papers").glob("*.md")]}
    assert main(["catalogue", "--write-docs"]) == 0
    assert capsys.readouterr().out == ""
    assert {path: path.stat().st_mtime_ns for path in before} == before


def test_writing_the_cards_twice_changes_nothing() -> None:
    page = "papers/clark.md"
    once = page_with_cards((DOCS / page).read_text(encoding="utf-8"), page, ROWS)
    assert page_with_cards(once, page, ROWS) == once


@pytest.mark.parametrize("page", [CATALOGUE_PAGE, "papers/clark.md"])
def test_a_card_links_each_part_of_its_result(page: str) -> None:
    """Clark Table 1 on the catalogue and on its paper page: the view, both aggregates, both fact
    tables, the compute function, the chart function, every test, and MiniLM's chart."""
    row = next(row for row in ROWS if row.chart == "clark_table1_dependency_heads")
    card = card_markdown(row, page)
    up = "../" * page.count("/") + "../"
    targets = [target for target, _ in LINK.findall(card)]
    assert targets[1:6] == [
        f"{up}sql/results/{row.view}.sql",
        f"{up}sql/aggregates/agg_dependency_head_accuracy.sql",
        f"{up}sql/aggregates/agg_dependency_offset_baselines.sql",
        f"{up}sql/schema/dependencies.sql",
        f"{up}sql/schema/relation_hits.sql",
    ]
    api = up.removeprefix("../") + "api/"
    assert f"]({api}compute.md#dagster_project.compute.metrics.most_attended_words)" in card
    assert f"]({api}presentation.md#dagster_project.presentation.charts.clark.clark_dependency_chart)" in card
    assert {f"{up}{name}" for name in row.tests} <= set(targets)
    picture = f"{up.removeprefix('../')}snapshot/charts/clark_table1_dependency_heads.png"
    assert f"[![MiniLM, Clark et al. Table 1]({picture})]({picture})" in card  # a click opens it full size
    assert "`attn-warehouse run --analysis attention --corpus ud_ewt_test`" in card


def test_every_card_has_every_link() -> None:
    """Per card, on its paper page and on the catalogue: one link per view, aggregate, fact table,
    compute function and test, one to the chart function, one to the other page, and the picture
    and its full-size link wherever the snapshot has it."""
    for row in ROWS:
        for page in (row.docs.partition("#")[0], CATALOGUE_PAGE):
            targets = [target for target, _ in LINK.findall(card_markdown(row, page))]
            image = (CHART_IMAGES / f"{row.chart}.png").exists()
            wanted = 1 + len(row.aggregates) + len(row.facts) + len(row.compute) + 1 + len(row.tests) + 1 + 2 * image
            assert len(targets) == wanted, (page, row.chart, targets)
            assert sum(target.endswith(".sql") for target in targets) == 1 + len(row.aggregates) + len(row.facts)
            assert sum(target.endswith(".py") for target in targets) == len(row.tests)


def _resolves(page: str, target: str, anchor: str) -> str | None:
    """Why the link from `page` to `target#anchor` leads nowhere; None when it leads somewhere."""
    path = (DOCS / page).parent / target
    if not path.resolve().exists():
        return f"no file {path}"
    if not anchor:
        return None
    if path.resolve() == (DOCS / CATALOGUE_PAGE).resolve():
        headings = re.findall(r"^#{2,3} (.+)$", path.read_text(encoding="utf-8"), flags=re.MULTILINE)
        return None if anchor in {heading_anchor(heading) for heading in headings} else f"no heading #{anchor}"
    if path.resolve().is_relative_to(DOCS / "papers"):
        headings = re.findall(r"^## (.+)$", path.read_text(encoding="utf-8"), flags=re.MULTILINE)
        return None if anchor in {heading_anchor(heading) for heading in headings} else f"no heading #{anchor}"
    layer = next(layer for layer, api_page in API_PAGES.items() if (DOCS / api_page).resolve() == path.resolve())
    module, _, name = anchor.rpartition(".")
    if not module.startswith(f"dagster_project.{layer}."):
        return f"{anchor} is not documented on the {layer} page"
    function = getattr(importlib.import_module(module), name, None)
    # mkdocstrings lists only members with a docstring: one without has no anchor
    return None if function is not None and function.__doc__ else f"{anchor} is not a documented function"


def test_every_card_link_leads_to_something() -> None:
    pages = [CATALOGUE_PAGE, *PAPER_PAGES]
    broken = {
        (page, target, anchor): why
        for page in pages
        for body in _cards(page).values() or [(DOCS / page).read_text(encoding="utf-8")]
        for target, anchor in LINK.findall(body)
        if (why := _resolves(page, target, anchor))
    }
    assert broken == {}


def test_every_snapshot_image_is_a_chart_of_the_registry() -> None:
    assert {path.stem for path in CHART_IMAGES.glob("*.png")} <= {row.chart for row in ROWS}


@pytest.mark.slow
def test_the_built_site_has_every_card_link(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """mkdocs builds the site (strict); on the built paper pages every card's function link has its
    anchor in the API page and every repository file link goes to the repository host."""
    pytest.importorskip("mkdocs")
    monkeypatch.setenv("ATTN_GIT_URL", "https://github.com/o/r")
    monkeypatch.setenv("ATTN_GIT_BRANCH", "dev")
    from mkdocs.commands.build import build
    from mkdocs.config import load_config

    config = load_config(str(PROJECT_ROOT / "mkdocs.yml"), site_dir=str(tmp_path), strict=True)
    build(config)
    ids = {
        page: set(re.findall(r'id="([^"]+)"', (tmp_path / page.removesuffix(".md") / "index.html").read_text()))
        for page in API_PAGES.values()
    }
    clark = (tmp_path / "papers" / "clark" / "index.html").read_text()
    anchors = re.findall(r'href="\.\./\.\./(api/\w+)/#(dagster_project\.[\w.]+)"', clark)
    assert anchors and all(anchor in ids[f"{page}.md"] for page, anchor in anchors)
    repository = "https://github.com/o/r/blob/dev/"
    table1 = next(row for row in ROWS if row.chart == "clark_table1_dependency_heads")
    assert f'href="{repository}sql/results/{table1.view}.sql"' in clark
    assert not re.search(r'href="(\.\./)+(sql|tests)/', clark)


def test_a_card_folds_its_views_sql_and_one_judge_per_registry_entry_of_its_claims() -> None:
    """Clark Table 1: the view's file, then one judge for its 15 relations' claims (one entry, `each`)
    and one for each claim of its own."""
    row = next(row for row in ROWS if row.chart == "clark_table1_dependency_heads")
    blocks = "\n".join(sql_blocks(row))
    view = (PROJECT_ROOT / "sql" / "results" / f"{row.view}.sql").read_text(encoding="utf-8").strip()
    assert blocks.startswith(f'??? abstract "SQL of the view `{row.view}`"\n\n    ```sql\n')
    assert "\n".join(f"    {line}".rstrip() for line in view.splitlines()) in blocks
    claims = [claim for claim in load_claims() if claim.chart == row.chart]
    entries = {claim.template: claim for claim in reversed(claims)}  # the first claim of each entry
    assert f"SQL that judges its {len(claims)} claims" in blocks
    assert blocks.count("    ```sql\n") == 1 + len(entries)
    relations = [claim for claim in claims if claim.template == "clark_table1_{relation}_beats_baseline"]
    assert len(relations) == 15
    assert f"`{relations[0].claim}`; `{relations[1].claim}`, " in blocks
    assert all(
        "\n".join(f"    {line}".rstrip() for line in claim.judge.splitlines()) in blocks for claim in entries.values()
    )


def test_the_catalogue_opens_with_every_result_linking_to_its_card() -> None:
    page = catalogue_markdown(ROWS)
    overview = page.split("## Every result\n")[1].split("\n## ")[0]
    links = re.findall(r"^\| [^|]+ \| \[([^]]+)\]\(#([^)]+)\) \| `(\w+)` \|$", overview, flags=re.MULTILINE)
    assert [(result, view) for result, _, view in links] == [(row.result, row.view) for row in ROWS]
    headings = {heading_anchor(heading) for heading in re.findall(r"^### (.+)$", page, flags=re.MULTILINE)}
    assert {anchor for _, anchor, _ in links} <= headings


def test_a_card_names_the_views_own_test_first() -> None:
    row = next(row for row in ROWS if row.chart == "clark_fig2_special_tokens")
    assert "| tests | none of its own in `tests/views`; named by [`tests/" in card_markdown(row, CATALOGUE_PAGE)
    row = next(row for row in ROWS if row.chart == "clark_table1_dependency_heads")
    assert (
        "| tests | its own: [`tests/views/test_dependency.py`](../tests/views/test_dependency.py); also named by "
        in (card_markdown(row, CATALOGUE_PAGE))
    )
