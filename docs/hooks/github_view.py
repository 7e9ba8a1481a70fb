"""mkdocs hook: the docs pages are written to read well on GitHub, and this adapts them for the site.

- A link from a page to a repository file outside docs/ (a SQL view, a test) is a relative path,
  which GitHub follows; on the site it becomes that file's page on the repository host (mkdocs.yml
  `repo_url`, on the branch of `edit_uri`). A link to a path that does not exist is left alone, so
  `mkdocs build --strict` fails on it.
- An include of a README section and an API page's mkdocstrings directive are written inside an
  HTML comment on a line of their own, `<!-- --8<-- "README.md:NAME" -->` and
  `<!-- ::: dagster_project.compute -->`, which GitHub does not show (the bare lines it shows as
  text); here they become the pymdownx.snippets and mkdocstrings lines they wrap."""

import re
from pathlib import Path, PurePosixPath

LINK = re.compile(r"\]\((?P<target>[^()\s#]+)(?P<anchor>#[^()\s]*)?\)")
# edit_uri names the branch: edit/<branch>/docs/ on GitHub, -/edit/<branch>/docs/ on GitLab.
EDIT_URI = re.compile(r"^(?P<prefix>(?:-/)?)edit/(?P<branch>[^/]+)/docs/?$")
HIDDEN_FROM_GITHUB = re.compile(r'^<!-- (--8<-- "[^"\n]+"|::: [\w.]+) -->$', re.MULTILINE)


def repository_file_url(repo_url: str, edit_uri: str, path: str) -> str:
    """The page of the repository file `path` (relative to the repository root) on its host."""
    found = EDIT_URI.match(edit_uri)
    if found is None:
        raise ValueError(
            f"mkdocs.yml edit_uri {edit_uri!r} is not edit/<branch>/docs/: set it so, e.g. edit/main/docs/"
        )
    return f"{repo_url.rstrip('/')}/{found['prefix']}blob/{found['branch']}/{path}"


def site_markdown(markdown: str, page_path: Path, docs_dir: Path, repo_url: str, edit_uri: str) -> str:
    """The Markdown of the page at `page_path` (in `docs_dir`) as the site builds it."""
    root = docs_dir.parent

    def rewrite(match: re.Match) -> str:
        target = match["target"]
        if "://" in target or target.startswith(("/", "mailto:")):
            return match[0]
        path = (page_path.parent / target).resolve()
        if path.is_relative_to(docs_dir) or not path.is_relative_to(root) or not path.exists():
            return match[0]
        relative = PurePosixPath(path.relative_to(root).as_posix())
        return f"]({repository_file_url(repo_url, edit_uri, str(relative))}{match['anchor'] or ''})"

    return HIDDEN_FROM_GITHUB.sub(r"\1", LINK.sub(rewrite, markdown))


def on_page_markdown(markdown: str, *, page, config, files) -> str:
    docs_dir = Path(config["docs_dir"]).resolve()
    return site_markdown(markdown, docs_dir / page.file.src_path, docs_dir, config["repo_url"], config["edit_uri"])
