"""mkdocs hook: a Markdown link from a docs page to a file of the repository outside docs/ (a SQL
view, a test) is a relative path, which GitHub follows; on the site it becomes that file's page on
the repository host (mkdocs.yml `repo_url`, on the branch of `edit_uri`). A link to a path that
does not exist is left alone, so `mkdocs build --strict` fails on it."""

import re
from pathlib import Path, PurePosixPath

LINK = re.compile(r"\]\((?P<target>[^()\s#]+)(?P<anchor>#[^()\s]*)?\)")
# edit_uri names the branch: edit/<branch>/docs/ on GitHub, -/edit/<branch>/docs/ on GitLab.
EDIT_URI = re.compile(r"^(?P<prefix>(?:-/)?)edit/(?P<branch>[^/]+)/docs/?$")


def repository_file_url(repo_url: str, edit_uri: str, path: str) -> str:
    """The page of the repository file `path` (relative to the repository root) on its host."""
    found = EDIT_URI.match(edit_uri)
    if found is None:
        raise ValueError(
            f"mkdocs.yml edit_uri {edit_uri!r} is not edit/<branch>/docs/: set it so, e.g. edit/main/docs/"
        )
    return f"{repo_url.rstrip('/')}/{found['prefix']}blob/{found['branch']}/{path}"


def on_page_markdown(markdown: str, *, page, config, files) -> str:
    docs_dir = Path(config["docs_dir"]).resolve()
    root = docs_dir.parent
    page_dir = (docs_dir / page.file.src_path).parent

    def rewrite(match: re.Match) -> str:
        target = match["target"]
        if "://" in target or target.startswith(("/", "mailto:")):
            return match[0]
        path = (page_dir / target).resolve()
        if path.is_relative_to(docs_dir) or not path.is_relative_to(root) or not path.exists():
            return match[0]
        relative = PurePosixPath(path.relative_to(root).as_posix())
        return f"]({repository_file_url(config['repo_url'], config['edit_uri'], str(relative))}{match['anchor'] or ''})"

    return LINK.sub(rewrite, markdown)
