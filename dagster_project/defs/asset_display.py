"""What the Dagster UI shows about each computed asset besides its data: its kinds (the icons
under a node of the asset graph: what computes it, where it lands) and a link to the code that
computes it (the asset's function; on the repository host when ATTN_GIT_URL is set).

Kinds are declared once per asset module (KINDS_BY_MODULE); an asset module missing there is an
error at load, so no asset reaches the graph without them."""

import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

from dagster import (
    AnchorBasedFilePathMapping,
    AssetsDefinition,
    BetaWarning,
    link_code_references_to_git,
    with_source_code_references,
)

from dagster_project.settings import PROJECT_ROOT, source_repository

ASSET_MODULES = "dagster_project.defs.assets"

# Asset module (below ASSET_MODULES) -> kinds of every asset it defines. Dagster gives known kind
# names an icon (pytorch, huggingface, polars, duckdb, sql); others show as text.
KINDS_BY_MODULE: Mapping[str, frozenset[str]] = {
    "models": frozenset({"huggingface", "duckdb"}),
    "corpora": frozenset({"huggingface", "polars", "duckdb"}),
    "facts": frozenset({"pytorch", "polars", "duckdb"}),
    "compare.faithfulness": frozenset({"pytorch", "polars", "duckdb"}),
    "compare.head_matching": frozenset({"pytorch", "duckdb"}),
    "clark.coreference": frozenset({"polars", "duckdb"}),
    "clark.gradients": frozenset({"pytorch", "polars", "duckdb"}),
    "clark.head_clustering": frozenset({"pytorch", "polars", "duckdb"}),
    "clark.probes": frozenset({"pytorch", "polars", "duckdb"}),
    "kovaleva.finetuning": frozenset({"pytorch", "huggingface", "duckdb"}),
    "kovaleva.similarity": frozenset({"pytorch", "duckdb"}),
    "pascual.hta": frozenset({"pytorch", "polars", "duckdb"}),
    "views": frozenset({"sql", "duckdb"}),
    "charts": frozenset({"altair", "duckdb"}),
    "report": frozenset({"altair", "html"}),
}

# The repository path of this file locates every other one (the checkout mirrors the repository).
REPOSITORY_ANCHOR = "pyproject.toml"


@contextmanager
def code_references_api() -> Iterator[None]:
    """Dagster 1.13 marks its code-reference API beta and would warn on every load of the
    definitions; the warning says nothing a user of this project can act on."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BetaWarning)
        yield


def asset_module(asset: AssetsDefinition) -> str:
    """The module of the function that computes `asset`, relative to ASSET_MODULES."""
    return asset.node_def.compute_fn.decorated_fn.__module__.removeprefix(f"{ASSET_MODULES}.")


def kinds_of(asset: AssetsDefinition) -> frozenset[str]:
    """The kinds KINDS_BY_MODULE declares for the module of `asset`."""
    module = asset_module(asset)
    if module not in KINDS_BY_MODULE:
        raise KeyError(
            f"asset {asset.key.to_user_string()} is defined in {asset.node_def.compute_fn.decorated_fn.__module__}, "
            f"which has no kinds: add '{module}' to KINDS_BY_MODULE in {__name__}"
        )
    return KINDS_BY_MODULE[module]


def displayed_assets(assets: Sequence[AssetsDefinition]) -> list[AssetsDefinition]:
    """`assets` with the kinds of their module and a reference to their function's file and line
    (a URL on the repository host when source_repository() is configured). External assets (no
    function) keep the kinds and references they declare."""
    with code_references_api():
        referenced = [
            with_source_code_references(
                [asset.map_asset_specs(lambda spec, asset=asset: spec.merge_attributes(kinds=set(kinds_of(asset))))]
            )[0]
            if asset.is_executable
            else asset
            for asset in assets
        ]
        repository = source_repository()
        if repository is None:
            return referenced
        url, branch = repository
        return list(
            link_code_references_to_git(
                referenced,
                git_url=url,
                git_branch=branch,
                file_path_mapping=AnchorBasedFilePathMapping(
                    local_file_anchor=PROJECT_ROOT / REPOSITORY_ANCHOR,
                    file_anchor_path_in_repository=REPOSITORY_ANCHOR,
                ),
            )
        )
