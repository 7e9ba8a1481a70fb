"""mkdocs hook: the docs pages are written to read well on GitHub, and this adapts them for the site.

- The repository's host page comes from the setting the Dagster UI's code references read,
  ATTN_GIT_URL and ATTN_GIT_BRANCH (settings.source_repository): it becomes the site's `repo_url`
  (the header's repository button) and `edit_uri`. Unset, the site names no repository.
- A link from a page to a repository file outside docs/ (a SQL view, a test) is a relative path,
  which GitHub follows; on the site it becomes that file's page on the repository host, or, with no
  host configured, a page of the site that shows the file (source/<path>.md, made here; a folder
  becomes its path as code text). A link to a path that does not exist is left alone, so
  `mkdocs build --strict` fails on it.
- A ```mermaid block, which GitHub draws, is drawn on the site by mermaid, which mkdocs-material
  fetches from a CDN unless the page has already loaded it: a page with a diagram loads the copy
  the site serves (vendor/mermaid/), so that it draws offline. The build puts that copy there from
  the npm registry's pinned package, checked and kept in the user cache folder, the way
  `attn-warehouse data fetch` gets a corpus (its licence and notice: docs/vendor/mermaid/).
- An include of a README section and an API page's mkdocstrings directive are written inside an
  HTML comment on a line of their own, `<!-- --8<-- "README.md:NAME" -->` and
  `<!-- ::: dagster_project.compute -->`, which GitHub does not show (the bare lines it shows as
  text); here they become the pymdownx.snippets and mkdocstrings lines they wrap."""

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, InclusionLevel
from mkdocs.utils import get_relative_url
from platformdirs import user_cache_path

from dagster_project.corpora.download import FetchError, fetch_file
from dagster_project.corpora.manifest import Archive, SourceFile
from dagster_project.settings import source_repository

LINK = re.compile(r"\[(?P<text>[^\]\n]*)\]\((?P<target>[^()\s#]+)(?P<anchor>#[^()\s]*)?\)")
HIDDEN_FROM_GITHUB = re.compile(r'^<!-- (--8<-- "[^"\n]+"|::: [\w.]+) -->$', re.MULTILINE)
Repository = tuple[str, str]
MERMAID_SCRIPT = "vendor/mermaid/mermaid.min.js"
# mermaid 11 (what mkdocs-material expects), as npm ships it; to update, the new version's numbers.
MERMAID = SourceFile(
    path="mermaid-11.17.2/mermaid.min.js",
    url="https://registry.npmjs.org/mermaid/-/mermaid-11.17.2.tgz",
    size=3_572_661,
    sha256="581ed7d74bd9048d0e3a91363927d72ef22942d7722546b27f7cc29e35390eb8",
    licence="MIT",
    archive=Archive(
        member="package/dist/mermaid.min.js",
        size=17_796_365,
        sha256="6ad2f42c3fc26bbf9e45cbb6d11898972573ea52b33a5f4ff51952899f950ffd",
    ),
)
# mkdocs-material's configuration script, which its bundle follows: mermaid must be loaded before it.
THEME_SCRIPTS = '<script id="__config"'
# Where the site shows the repository files its pages link to when no host is configured.
SOURCE_PAGES = "source"
LANGUAGES = {".py": "python", ".sql": "sql", ".md": "markdown", ".toml": "toml", ".yaml": "yaml", ".yml": "yaml"}


def _host_prefix(repo_url: str) -> str:
    """GitLab puts its file and edit pages under `-/`; GitHub at the repository's top."""
    return "-/" if "gitlab" in urlsplit(repo_url).netloc else ""


def repository_file_url(repository: Repository, path: str) -> str:
    """The page of the repository file `path` (relative to the repository root) on its host,
    `repository` being (host page, branch)."""
    repo_url, branch = repository
    return f"{repo_url}/{_host_prefix(repo_url)}blob/{branch}/{path}"


def repository_path(target: str, page_path: Path, docs_dir: Path) -> str | None:
    """The path, from the repository root, of the existing repository file or folder outside
    `docs_dir` that link `target` of the page at `page_path` names; None for any other link."""
    if "://" in target or target.startswith(("/", "mailto:")):
        return None
    path = (page_path.parent / target).resolve()
    root = docs_dir.parent
    if path.is_relative_to(docs_dir) or not path.is_relative_to(root) or not path.exists():
        return None
    return path.relative_to(root).as_posix()


def linked_repository_files(markdown: str, page_path: Path, docs_dir: Path) -> Iterator[str]:
    """The repository files (not folders) outside `docs_dir` that the page's links name."""
    for match in LINK.finditer(markdown):
        relative = repository_path(match["target"], page_path, docs_dir)
        if relative is not None and (docs_dir.parent / relative).is_file():
            yield relative


def source_page_uri(relative: str) -> str:
    """The site page (a docs path) that shows the repository file `relative`."""
    return f"{SOURCE_PAGES}/{relative}.md"


def source_page(relative: str, text: str) -> str:
    """The Markdown of the page that shows the repository file `relative`, whose content is `text`:
    its path as the title and the file as a code block (fenced longer than any backtick run in it)."""
    fence = "`" * max(3, 1 + max((len(run) for run in re.findall(r"`+", text)), default=0))
    language = LANGUAGES.get(Path(relative).suffix, "text")
    return (
        f"---\nsearch:\n  exclude: true\n---\n\n# `{relative}`\n\n"
        f"The repository's file as this site was built from it.\n\n{fence}{language}\n{text.rstrip()}\n{fence}\n"
    )


def site_markdown(markdown: str, page_path: Path, docs_dir: Path, repository: Repository | None) -> str:
    """The Markdown of the page at `page_path` (in `docs_dir`) as the site builds it, with links to
    repository files on `repository` (host page, branch), or, when None, to the site's pages that
    show them (a folder: its path as code text)."""

    def rewrite(match: re.Match) -> str:
        relative = repository_path(match["target"], page_path, docs_dir)
        if relative is None:
            return match[0]
        if repository is not None:
            return f"[{match['text']}]({repository_file_url(repository, relative)}{match['anchor'] or ''})"
        if (docs_dir.parent / relative).is_file():
            return f"[{match['text']}]({os.path.relpath(docs_dir / source_page_uri(relative), page_path.parent)})"
        code = f"`{relative}`"
        return code if match["text"] == code else f"{match['text']} ({code})"

    return HIDDEN_FROM_GITHUB.sub(r"\1", LINK.sub(rewrite, markdown))


def on_config(config):
    """The site's repository button and edit links on the configured host, or none."""
    repository = source_repository()
    if repository is None:
        config["repo_url"] = config["repo_name"] = config["edit_uri"] = None
    else:
        repo_url, branch = repository
        config["repo_url"] = repo_url
        config["repo_name"] = urlsplit(repo_url).path.strip("/") or urlsplit(repo_url).netloc
        config["edit_uri"] = f"{_host_prefix(repo_url)}edit/{branch}/docs/"
    return config


def on_files(files, *, config):
    """With no repository host, a page for each repository file the pages link to."""
    if source_repository() is not None:
        return files
    docs_dir = Path(config["docs_dir"]).resolve()
    root = docs_dir.parent
    linked = {
        relative
        for file in files.documentation_pages()
        for relative in linked_repository_files(file.content_string, docs_dir / file.src_path, docs_dir)
    }
    for relative in sorted(linked):
        text = (root / relative).read_text(encoding="utf-8")
        page = source_page(relative, text)
        files.append(
            File.generated(config, source_page_uri(relative), content=page, inclusion=InclusionLevel.NOT_IN_NAV)
        )
    return files


def on_page_markdown(markdown: str, *, page, config, files) -> str:
    docs_dir = Path(config["docs_dir"]).resolve()
    return site_markdown(markdown, docs_dir / page.file.src_path, docs_dir, source_repository())


def with_mermaid(html: str, page_url: str) -> str:
    """The page `html` (at site URL `page_url`), loading the site's mermaid when it has a diagram."""
    if 'class="mermaid"' not in html:
        return html
    script = f'<script src="{get_relative_url(MERMAID_SCRIPT, page_url)}"></script>'
    if html.count(THEME_SCRIPTS) != 1:
        raise ValueError(f"{page_url}: no single {THEME_SCRIPTS}> to load mermaid before; has the theme changed?")
    return html.replace(THEME_SCRIPTS, f"{script}\n{THEME_SCRIPTS}")


def on_post_page(output: str, *, page, config) -> str:
    return with_mermaid(output, page.url)


def on_post_build(*, config) -> None:
    """The site's copy of mermaid, fetched once into the user cache folder."""
    cache = user_cache_path("attention-warehouse") / "docs"
    cached = cache / MERMAID.path
    if not cached.exists():
        try:
            fetch_file(MERMAID, cache, mirror=None, progress=lambda _: None)
        except (FetchError, OSError) as error:
            raise PluginError(
                f"mermaid for the diagrams: {error}; the build fetches {MERMAID.url} once into {cache} "
                f"(or put its package/dist/mermaid.min.js at {cached})"
            ) from error
    target = Path(config["site_dir"]) / MERMAID_SCRIPT
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(cached, target)
