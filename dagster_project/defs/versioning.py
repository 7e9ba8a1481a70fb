"""Code and data versions that tell the refresh schedule what is stale.

Code version of an asset: a hash of what its computation runs, not of where that code lives.
The project modules it uses (computing_modules: its own module and, transitively, the modules
the names it uses come from, plumbing aside) are parsed; docstrings, import statements (they
only say where code lives; the imported code is hashed on its own) and the Dagster metadata of
decorators (group, tags, description: DECORATOR_METADATA) are dropped, and each remaining
top-level statement is hashed. The version is the hash of the SORTED SET of those
digests, so moving a function to another module, renaming a module, editing a comment, a
docstring or an import line changes nothing, while editing any statement that computes does.
Editing metrics.py marks the assets that use it stale and no others.

Data version of a corpus's input: a fingerprint of its files' content (corpus_files_version),
reported as the `<corpus>_files` external asset that the corpus asset depends on.
"""

import ast
import hashlib
import importlib
import importlib.util
import inspect
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from pathlib import Path

from dagster import AssetKey, AssetsDefinition, AssetSpec, CodeReferencesMetadataValue, LocalFileCodeReference

from dagster_project.corpora import CORPORA, CorpusSpec
from dagster_project.defs.asset_display import ASSET_MODULES, code_references_api

PROJECT = "dagster_project"
# Plumbing (modules, or packages with everything under them) that asset modules import: a
# change there does not change what an asset computes. Other asset modules are left out too:
# an asset module imports its siblings for their asset definitions, not to compute with them.
PLUMBING = frozenset(
    f"{PROJECT}.{name}"
    for name in (
        "storage",
        "settings",
        "cli",
        "definitions",
        "defs.partitions",
        "defs.pools",
        "defs.resources",
        "defs.tags",
        "defs.registration",
        "defs.versioning",
        "defs.provenance",
        "defs.jobs",
        "defs.sensors",
        "defs.schedules",
        "compute.models",
        "corpora.base",
    )
)
# Plumbing to everyone else, but what these asset modules compute (encoder_model inspects the
# checkpoint with compute.models).
OWN_PLUMBING: Mapping[str, frozenset[str]] = {
    f"{ASSET_MODULES}.models": frozenset({f"{PROJECT}.compute.models"}),
}
FILES_SUFFIX = "_files"


# Keyword arguments of a decorator (@asset(...), @multi_asset(...)) that describe an asset to
# Dagster rather than compute it: where it is shown, how it is selected or scheduled. Its inputs
# are tracked by Dagster itself (a new or removed dependency makes an asset stale).
DECORATOR_METADATA = frozenset(
    {"group_name", "description", "tags", "kinds", "owners", "metadata", "compute_kind", "pool", "op_tags", "deps"}
)


class _DropDocstringsAndImports(ast.NodeTransformer):
    """Removes docstrings (module, class, function), every import statement at any depth and
    the metadata keywords of decorators (DECORATOR_METADATA)."""

    def _drop_docstring(self, node: ast.AST) -> ast.AST:
        body = getattr(node, "body", None)
        if (
            body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:]
        return self.generic_visit(node)

    visit_Module = visit_ClassDef = _drop_docstring

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.AST:
        for decorator in node.decorator_list:
            if isinstance(decorator, ast.Call):
                decorator.keywords = [word for word in decorator.keywords if word.arg not in DECORATOR_METADATA]
        return self._drop_docstring(node)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Import(self, node: ast.Import) -> None:
        return None

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        return None


def code_statements(source: str) -> list[ast.stmt]:
    """The top-level statements of `source` with docstrings and import statements removed."""
    return _DropDocstringsAndImports().visit(ast.parse(source)).body


def statement_digest(statement: ast.stmt) -> str:
    """Hash of a statement's syntax tree: comments, formatting and positions do not count."""
    return hashlib.sha256(ast.dump(statement, include_attributes=False).encode()).hexdigest()


@lru_cache(maxsize=512)
def source_digests(source: str) -> frozenset[str]:
    """One digest per top-level statement of `source`, docstrings and imports removed (so
    comments, docstrings, formatting and import lines do not count)."""
    return frozenset(statement_digest(statement) for statement in code_statements(source))


def module_file(module_name: str) -> Path:
    """The source file of a module (found, not imported)."""
    spec = importlib.util.find_spec(module_name)
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        raise ModuleNotFoundError(f"no Python source for module {module_name}")
    return Path(spec.origin)


class ModuleWalk:
    """Reads of the project's modules that one versioning pass shares: each module's source is read,
    and the project modules its names come from are found, once per walk, not once per asset that
    reaches the module (versioned_assets versions every asset with one walk). A new walk reads again,
    so a module edited between two walks is seen."""

    def __init__(self) -> None:
        self._sources: dict[str, str] = {}
        self._uses: dict[str, frozenset[str]] = {}

    def source(self, module_name: str) -> str:
        if module_name not in self._sources:
            self._sources[module_name] = module_file(module_name).read_text(encoding="utf-8")
        return self._sources[module_name]

    def defining_module(self, module_name: str, name: str) -> str:
        """The module whose statements define `name` as seen from `module_name`: an imported name
        is followed through re-exports (`from dagster_project.corpora import GLUE_TASKS` is defined
        in corpora/text_pairs.py), as far as project modules go."""
        seen = set()
        while (module_name, name) not in seen and _is_project(module_name):
            seen.add((module_name, name))
            source = _import_sources(self.source(module_name), _package(module_name)).get(name)
            if source is None:
                return module_name
            module_name, name = source
        return module_name

    def uses(self, module_name: str) -> frozenset[str]:
        """The project modules (not asset modules, not plumbing) that the names `module_name` uses
        come from: a module's own name, a function's or class's defining module, and for other
        imported values (registries such as CORPORA, constants) the module that defines them."""
        if module_name not in self._uses:
            self._uses[module_name] = frozenset(self._find_uses(module_name))
        return self._uses[module_name]

    def _find_uses(self, module_name: str) -> set[str]:
        source = self.source(module_name)
        imported = _import_sources(source, _package(module_name))
        found = set()
        for name, value in vars(importlib.import_module(module_name)).items():
            if inspect.ismodule(value):
                # A package gains an attribute for each submodule anyone imports; only the modules
                # its own statements bind count, so the walk does not depend on what was imported first.
                origin = value.__name__ if name in imported or name in _bound_modules(source) else None
            elif inspect.isclass(value) or inspect.isroutine(value):
                origin = getattr(value, "__module__", None)
            else:
                origin = self.defining_module(module_name, name) if name in imported else None
            if (
                isinstance(origin, str)
                and origin.startswith(f"{PROJECT}.")
                and not origin.startswith(f"{ASSET_MODULES}.")
                and not any(origin == plumbing or origin.startswith(f"{plumbing}.") for plumbing in PLUMBING)
            ):
                found.add(origin)
        return found


def digests_version(digests: Iterable[str]) -> str:
    """The version of a set of statement digests: order and duplicates do not count."""
    return hashlib.sha256("\n".join(sorted(set(digests))).encode()).hexdigest()[:16]


def modules_version(module_names: Sequence[str], walk: ModuleWalk | None = None) -> str:
    """Hash of the sorted set of the named modules' statement digests (source_digests): moving
    a statement between them or renaming one of them leaves it unchanged."""
    walk = walk or ModuleWalk()
    return digests_version(digest for name in sorted(set(module_names)) for digest in source_digests(walk.source(name)))


@lru_cache(maxsize=512)
def _import_sources(source: str, package: str) -> dict[str, tuple[str, str]]:
    """Name bound by a `from M import name [as alias]` statement (any depth) -> (M, name),
    relative imports resolved."""
    found = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            module = importlib.util.resolve_name("." * node.level + (node.module or ""), package)
            for alias in node.names:
                found[alias.asname or alias.name] = (module, alias.name)
    return found


@lru_cache(maxsize=512)
def _bound_modules(source: str) -> frozenset[str]:
    """Names an `import M [as alias]` statement (any depth) binds."""
    return frozenset(
        alias.asname or alias.name.partition(".")[0]
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Import)
        for alias in node.names
    )


def _package(module_name: str) -> str:
    spec = importlib.util.find_spec(module_name)
    return (
        module_name
        if spec is not None and spec.submodule_search_locations is not None
        else module_name.rpartition(".")[0]
    )


def _is_project(module_name: str) -> bool:
    return module_name == PROJECT or module_name.startswith(f"{PROJECT}.")


def computing_modules(asset: AssetsDefinition, walk: ModuleWalk | None = None) -> set[str] | None:
    """The asset's module and every project module it uses, transitively, plumbing aside
    (corpus assets reach every reader through the dagster_project.corpora registry they import).
    None for an asset without a Python function (graph-backed)."""
    function = getattr(getattr(asset.node_def, "compute_fn", None), "decorated_fn", None)
    if function is None:
        return None
    walk = walk or ModuleWalk()
    module = function.__module__
    pending = {module} | OWN_PLUMBING.get(module, frozenset())
    found: set[str] = set()
    while pending:
        name = pending.pop()
        found.add(name)
        pending |= walk.uses(name) - found
    return found


@lru_cache(maxsize=256)
def _content_digest(path: Path, size: int, mtime_ns: int) -> str:
    """The SHA-256 of a file's bytes, read once per (size, modification time) in a process."""
    with path.open("rb") as file:
        return hashlib.file_digest(file, "sha256").hexdigest()


def corpus_files_version(spec: CorpusSpec, data_root: Path) -> str:
    """Fingerprint of a corpus's files under `data_root`: which alternative exists and its content.
    Content, not modification time: a data folder copied or provisioned again (same bytes, new
    times) keeps every corpus current, so a long reproduction resumes where it stopped."""
    digest = hashlib.sha256()
    for entry in spec.files:
        options = (entry,) if isinstance(entry, str) else entry
        found = next((data_root / name for name in options if (data_root / name).is_file()), None)
        if found is None:
            digest.update(f"{entry}|missing\n".encode())
            continue
        stat = found.stat()
        content = _content_digest(found.resolve(), stat.st_size, stat.st_mtime_ns)
        digest.update(f"{entry}|{found.relative_to(data_root)}|{content}\n".encode())
    return digest.hexdigest()[:16]


def corpus_files_key(corpus: str) -> AssetKey:
    return AssetKey(f"{corpus}{FILES_SUFFIX}")


def reader_reference(spec: CorpusSpec) -> CodeReferencesMetadataValue:
    """Where the code that reads the corpus's files is (its reader, unwrapped from a partial)."""
    reader = inspect.unwrap(getattr(spec.read, "func", spec.read))
    with code_references_api():
        return CodeReferencesMetadataValue(
            code_references=[
                LocalFileCodeReference(
                    file_path=inspect.getsourcefile(reader),
                    line_number=inspect.getsourcelines(reader)[1],
                    label="reader",
                )
            ]
        )


# External assets: the refresh schedule reports their versions (schedules.record_corpus_files).
# Their kind and the link to their reader are declared here, as they have no function of their own
# (defs/asset_display.py gives the computed assets theirs).
corpus_files_assets = [
    AssetsDefinition(
        specs=[
            AssetSpec(
                corpus_files_key(name),
                group_name="corpora",
                description=f"The input files of corpus '{name}' in the data directory; its data version is their "
                "fingerprint (name, size, mtime), reported by the refresh schedule.",
                kinds={"file"},
                metadata={"dagster/code_references": reader_reference(spec)},
            )
        ]
    )
    for name, spec in CORPORA.items()
    if spec.files
]


def computed_code_version(asset: AssetsDefinition, walk: ModuleWalk | None = None) -> str | None:
    """The code version this scheme gives `asset` (None: graph-backed, nothing to hash)."""
    walk = walk or ModuleWalk()
    modules = computing_modules(asset, walk)
    return modules_version(sorted(modules), walk) if modules else None


def _versioned_spec(asset: AssetsDefinition, spec: AssetSpec, walk: ModuleWalk) -> AssetSpec:
    return spec.replace_attributes(code_version=spec.code_version or computed_code_version(asset, walk))


def versioned_assets(assets: Sequence[AssetsDefinition]) -> list[AssetsDefinition]:
    """`assets` with code versions (an asset's own code_version is kept), after the external
    assets of the corpus files that the corpus assets depend on."""
    executable = [asset for asset in assets if asset.is_executable]
    walk = ModuleWalk()
    return [
        *corpus_files_assets,
        *(asset.map_asset_specs(lambda spec, asset=asset: _versioned_spec(asset, spec, walk)) for asset in executable),
    ]
