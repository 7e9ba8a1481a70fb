"""The docs pages that tell what the README tells (docs/index.md, docs/getting-started.md)
include its sections (pymdownx.snippets, written `<!-- --8<-- "README.md:NAME" -->` so that GitHub
hides the line; docs/hooks/github_view.py unwraps it for the site) instead of copying them: no
README line of prose, table or command appears in them by hand, every include names a section
the README marks, no page has an include GitHub would show, and every reference-style link in an
included section has a target on the page that includes it."""

import re

import pytest

from dagster_project.settings import PROJECT_ROOT

README = (PROJECT_ROOT / "README.md").read_text(encoding="utf-8")
PAGES = ("docs/index.md", "docs/getting-started.md")
INCLUDE = re.compile(r'^<!-- --8<-- "README\.md:([a-z][-_0-9a-z]*)" -->$', re.MULTILINE)
# Section name -> its text (sections may nest: the outputs table is inside the outputs section).
SECTIONS = {
    name: re.search(rf"\[start:{name}\] -->\n(.*?)<!-- --8<-- \[end:{name}\]", README, re.DOTALL).group(1)
    for name in re.findall(r"<!-- --8<-- \[start:([a-z][-_0-9a-z]*)\] -->", README)
}
REFERENCE = re.compile(r"\]\[([^\]]+)\]")
# Lines too short or too common to be a copy (fences, table rules).
SHORTEST_COPY = 30


def _lines(text: str) -> set[str]:
    return {line.strip() for line in text.splitlines() if len(line.strip()) >= SHORTEST_COPY}


@pytest.mark.parametrize("page", PAGES)
def test_no_readme_line_is_copied_by_hand(page: str) -> None:
    text = (PROJECT_ROOT / page).read_text(encoding="utf-8")
    assert _lines(README) & _lines(text) == set()


@pytest.mark.parametrize("page", PAGES)
def test_every_include_names_a_marked_section_and_has_its_link_targets(page: str) -> None:
    text = (PROJECT_ROOT / page).read_text(encoding="utf-8")
    included = INCLUDE.findall(text)
    assert included, f"{page} includes nothing from the README"
    assert set(included) <= set(SECTIONS), set(included) - set(SECTIONS)
    targets = set(re.findall(r"^\[([^\]]+)\]: \S+$", text, flags=re.MULTILINE))
    needed = {name for section in included for name in REFERENCE.findall(SECTIONS[section])}
    assert needed <= targets, f"{page} lacks the link targets {needed - targets}"


def test_no_page_has_an_include_github_would_show() -> None:
    """A bare `--8<--` line (pymdownx.snippets' own syntax) shows on GitHub as text."""
    pages = sorted((PROJECT_ROOT / "docs").rglob("*.md"))
    assert [str(page) for page in pages if re.search(r"^\s*-+8<-+", page.read_text(encoding="utf-8"), re.M)] == []


def test_every_picture_of_the_readme_is_a_committed_file() -> None:
    pictures = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", README)
    assert pictures and [path for path in pictures if not (PROJECT_ROOT / path).is_file()] == []


def test_the_readme_defines_its_reference_links() -> None:
    targets = set(re.findall(r"^\[([^\]]+)\]: \S+$", README, flags=re.MULTILINE))
    assert {name for body in SECTIONS.values() for name in REFERENCE.findall(body)} <= targets


def test_the_outputs_table_is_written_once() -> None:
    header = "| what | where (override with) |"
    assert README.count(header) == 1
    assert all(header not in (PROJECT_ROOT / path).read_text(encoding="utf-8") for path in PAGES)


def test_the_readme_is_a_front_door_of_at_most_150_lines() -> None:
    """What the project is, a picture, the two commands, the data command and where to go next;
    the rest lives in docs/ (getting-started.md holds the example queries and every command)."""
    assert len(README.splitlines()) <= 150
    assert {"two-commands", "data", "next"} <= set(SECTIONS)
    assert "attn-warehouse data fetch" in SECTIONS["data"]
