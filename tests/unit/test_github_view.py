"""The docs hook (docs/hooks/github_view.py): pages written for GitHub become the site's pages,
links to repository files pointing at the repository host (or shown as code paths when none is
configured), hidden README includes and API directives unwrapped, mermaid served by the site."""

import importlib.util
import re

import pytest

from dagster_project.settings import PROJECT_ROOT

pytest.importorskip("mkdocs", reason="the docs extra: pip install -c constraints.txt -e '.[docs]'")
DOCS = PROJECT_ROOT / "docs"
SPEC = importlib.util.spec_from_file_location("github_view", DOCS / "hooks" / "github_view.py")
github_view = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(github_view)
REPO = "https://github.com/o/r"


def _site(markdown: str, page: str = "papers/clark.md", repository: tuple[str, str] | None = (REPO, "main")) -> str:
    return github_view.site_markdown(markdown, DOCS / page, DOCS, repository)


def test_a_repository_file_link_goes_to_the_host() -> None:
    assert _site("[table](../../sql/schema/tokens.sql)") == f"[table]({REPO}/blob/main/sql/schema/tokens.sql)"
    assert _site("[readme](../README.md#queries)", "index.md") == f"[readme]({REPO}/blob/main/README.md#queries)"


def test_with_no_host_a_repository_file_link_goes_to_the_sites_page_of_the_file() -> None:
    tokens = "[`sql/schema/tokens.sql`](../../sql/schema/tokens.sql)"
    assert _site(tokens, repository=None) == "[`sql/schema/tokens.sql`](../source/sql/schema/tokens.sql.md)"
    assert _site("the [README](../README.md#queries)", "index.md", None) == "the [README](source/README.md.md)"
    assert _site("read the [code](../../dagster_project/compute/)", "api/compute.md", None) == (
        "read the code (`dagster_project/compute`)"
    )
    assert _site("[m](../methods.md#4-results)", repository=None) == "[m](../methods.md#4-results)"


def test_the_page_of_a_file_shows_it_whole_in_a_fence_longer_than_its_backticks() -> None:
    page = github_view.source_page("tests/x.py", 'DOC = """\n```sql\nSELECT 1\n```\n"""\n')
    assert page == (
        "---\nsearch:\n  exclude: true\n---\n\n# `tests/x.py`\n\n"
        "The repository's file as this site was built from it.\n\n"
        '````python\nDOC = """\n```sql\nSELECT 1\n```\n"""\n````\n'
    )
    assert github_view.source_page("LICENSE", "MIT").endswith("```text\nMIT\n```\n")


def test_the_pages_of_files_are_those_linked() -> None:
    markdown = "[a](../../sql/schema/tokens.sql) [b](../../sql/schema/) [c](../methods.md) [d](../../sql/nope.sql)"
    assert list(github_view.linked_repository_files(markdown, DOCS / "papers" / "clark.md", DOCS)) == [
        "sql/schema/tokens.sql"
    ]


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


def test_the_host_url_is_on_the_branch_in_the_hosts_layout() -> None:
    url = github_view.repository_file_url
    assert url(("https://github.com/o/r", "main"), "sql/x.sql") == "https://github.com/o/r/blob/main/sql/x.sql"
    assert url(("https://gitlab.com/o/r", "dev"), "a.py") == "https://gitlab.com/o/r/-/blob/dev/a.py"


def test_the_repository_comes_from_the_setting_the_dagster_ui_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATTN_GIT_URL", "https://gitlab.com/o/r/")
    monkeypatch.setenv("ATTN_GIT_BRANCH", "dev")
    config = github_view.on_config({"repo_url": None, "repo_name": None, "edit_uri": None})
    assert config == {"repo_url": "https://gitlab.com/o/r", "repo_name": "o/r", "edit_uri": "-/edit/dev/docs/"}
    monkeypatch.delenv("ATTN_GIT_URL")
    config = github_view.on_config({"repo_url": None, "repo_name": None, "edit_uri": "edit/main/docs/"})
    assert config == {"repo_url": None, "repo_name": None, "edit_uri": None}


def test_a_page_with_a_diagram_loads_the_sites_mermaid_before_the_theme() -> None:
    page = '<pre class="mermaid"><code>flowchart TB</code></pre>\n<script id="__config" type="application/json">'
    assert github_view.with_mermaid(page, "papers/clark/") == page.replace(
        '<script id="__config"', '<script src="../../vendor/mermaid/mermaid.min.js"></script>\n<script id="__config"'
    )
    assert github_view.with_mermaid("<p>no diagram</p>", "") == "<p>no diagram</p>"


def test_the_hook_is_what_mkdocs_runs() -> None:
    assert "  - docs/hooks/github_view.py\n" in (PROJECT_ROOT / "mkdocs.yml").read_text(encoding="utf-8")
