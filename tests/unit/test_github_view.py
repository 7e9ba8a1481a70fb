"""The docs hook (docs/hooks/github_view.py): pages written for GitHub become the site's pages,
links to repository files pointing at the repository host, hidden README includes and API
directives unwrapped."""

import importlib.util
import re

import pytest

from dagster_project.settings import PROJECT_ROOT

DOCS = PROJECT_ROOT / "docs"
SPEC = importlib.util.spec_from_file_location("github_view", DOCS / "hooks" / "github_view.py")
github_view = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(github_view)
REPO = "https://github.com/o/r"


def _site(markdown: str, page: str = "papers/clark.md") -> str:
    return github_view.site_markdown(markdown, DOCS / page, DOCS, REPO, "edit/main/docs/")


def test_a_repository_file_link_goes_to_the_host() -> None:
    assert _site("[table](../../sql/schema/tokens.sql)") == f"[table]({REPO}/blob/main/sql/schema/tokens.sql)"
    assert _site("[readme](../README.md#queries)", "index.md") == f"[readme]({REPO}/blob/main/README.md#queries)"


def test_links_inside_the_docs_and_elsewhere_stay() -> None:
    kept = "[m](../methods.md#4-results) [a](../api/compute.md#x.y) [w](https://example.org/a.sql) [s](#top)"
    assert _site(kept) == kept


def test_a_link_to_a_missing_file_stays_for_the_strict_build_to_fail_on() -> None:
    assert _site("[gone](../../sql/results/nope.sql)") == "[gone](../../sql/results/nope.sql)"


def test_a_hidden_include_is_unwrapped_on_its_own_line_only() -> None:
    page = '<!-- --8<-- "README.md:intro" -->\ntext <!-- --8<-- "README.md:intro" -->\n'
    assert _site(page, "index.md") == '--8<-- "README.md:intro"\ntext <!-- --8<-- "README.md:intro" -->\n'


def test_a_hidden_api_directive_is_unwrapped() -> None:
    assert _site("<!-- ::: dagster_project.compute -->\n", "api/compute.md") == "::: dagster_project.compute\n"


def test_no_page_has_a_directive_github_would_show() -> None:
    """A bare `::: module` line (mkdocstrings) shows on GitHub as text; the README's includes: test_readme_includes."""
    pages = sorted(DOCS.rglob("*.md"))
    assert [str(page) for page in pages if re.search(r"^:::", page.read_text(encoding="utf-8"), re.M)] == []


def test_the_host_url_follows_the_branch_of_edit_uri() -> None:
    url = github_view.repository_file_url
    assert (
        url("https://github.com/o/r/", "edit/main/docs/", "sql/x.sql") == "https://github.com/o/r/blob/main/sql/x.sql"
    )
    assert url("https://gitlab.com/o/r", "-/edit/dev/docs/", "a.py") == "https://gitlab.com/o/r/-/blob/dev/a.py"
    with pytest.raises(ValueError, match="edit/<branch>/docs/"):
        url("https://github.com/o/r", "src/docs/", "a.py")


def test_the_hook_is_what_mkdocs_runs() -> None:
    assert "  - docs/hooks/github_view.py\n" in (PROJECT_ROOT / "mkdocs.yml").read_text(encoding="utf-8")
