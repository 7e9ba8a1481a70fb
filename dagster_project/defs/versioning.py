"""Code and data versions that tell the refresh schedule what is stale.

Code version of an asset: a hash of the source of the project modules its computation uses
(computing_modules), so editing metrics.py marks the assets that use it stale and no others.
Data version of a corpus's input: a fingerprint (name, size, mtime) of its files,
reported as the `<corpus>_files` external asset that the corpus asset depends on.
"""

import hashlib
import importlib
import importlib.util
import inspect
from collections.abc import Sequence
from pathlib import Path

from dagster import AssetKey, AssetsDefinition, AssetSpec

from dagster_project.corpora import CORPORA, CorpusSpec

# Plumbing that asset modules import: a change there does not change what an asset computes
# (an asset module's own pure module, e.g. models.py for assets/models.py, still counts).
PLUMBING = frozenset(
    f"dagster_project.{name}"
    for name in (
        "storage.warehouse",
        "defs.partitions",
        "defs.resources",
        "settings",
        "defs.registration",
        "compute.models",
        "corpora.base",
        "defs.versioning",
    )
)
FILES_SUFFIX = "_files"


def modules_version(module_names: Sequence[str]) -> str:
    """Hash of the named modules' source files."""
    digest = hashlib.sha256()
    for name in sorted(set(module_names)):
        digest.update(Path(inspect.getfile(importlib.import_module(name))).read_bytes())
    return digest.hexdigest()[:16]


def _project_modules(module_name: str) -> set[str]:
    """The dagster_project modules (not assets, not plumbing) that `module_name`'s globals come from."""
    found = set()
    for value in vars(importlib.import_module(module_name)).values():
        name = value.__name__ if inspect.ismodule(value) else getattr(value, "__module__", None)
        if (
            isinstance(name, str)
            and name.startswith("dagster_project.")
            and not name.startswith("dagster_project.defs.assets")
            and name not in PLUMBING
        ):
            found.add(name)
    return found


def computing_modules(asset: AssetsDefinition) -> set[str] | None:
    """The asset's module, its own pure module (assets/X.py -> X.py) and every project module
    they use, transitively, plumbing aside (corpus assets: every reader, through the
    dagster_project.corpora registry). None for an asset without a Python function (graph-backed)."""
    function = getattr(getattr(asset.node_def, "compute_fn", None), "decorated_fn", None)
    if function is None:
        return None
    module = function.__module__
    own = f"dagster_project.compute.{module.rsplit('.', 1)[-1]}"
    pending = {module} | ({own} if importlib.util.find_spec(own) else set())
    found: set[str] = set()
    while pending:
        name = pending.pop()
        found.add(name)
        pending |= _project_modules(name) - found
    return found


def corpus_files_version(spec: CorpusSpec, data_root: Path) -> str:
    """Fingerprint of a corpus's files under `data_root`: which alternative exists, its size
    and modification time (cheap on large files; a rewrite with equal size and mtime is missed)."""
    digest = hashlib.sha256()
    for entry in spec.files:
        options = (entry,) if isinstance(entry, str) else entry
        found = next((data_root / name for name in options if (data_root / name).is_file()), None)
        stat = found.stat() if found else None
        digest.update(
            f"{entry}|{found.relative_to(data_root) if found else 'missing'}|{stat.st_size if stat else 0}|{stat.st_mtime_ns if stat else 0}\n".encode()
        )
    return digest.hexdigest()[:16]


def corpus_files_key(corpus: str) -> AssetKey:
    return AssetKey(f"{corpus}{FILES_SUFFIX}")


# External assets: the refresh schedule reports their versions (schedules.record_corpus_files).
corpus_files_assets = [
    AssetsDefinition(
        specs=[
            AssetSpec(
                corpus_files_key(name),
                group_name="corpora",
                description=f"The input files of corpus '{name}' in the data directory; its data version is their "
                "fingerprint (name, size, mtime), reported by the refresh schedule.",
            )
        ]
    )
    for name, spec in CORPORA.items()
    if spec.files
]


def _versioned_spec(asset: AssetsDefinition, spec: AssetSpec) -> AssetSpec:
    modules = computing_modules(asset)
    return spec.replace_attributes(
        code_version=spec.code_version or (modules_version(sorted(modules)) if modules else None)
    )


def versioned_assets(assets: Sequence[AssetsDefinition]) -> list[AssetsDefinition]:
    """`assets` with code versions (an asset's own code_version is kept), after the external
    assets of the corpus files that the corpus assets depend on."""
    executable = [asset for asset in assets if asset.is_executable]
    return [
        *corpus_files_assets,
        *(asset.map_asset_specs(lambda spec, asset=asset: _versioned_spec(asset, spec)) for asset in executable),
    ]
