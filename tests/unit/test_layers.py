"""The package's layers, read from its import statements: imports point downward only, no
cycles, Dagster only in the Dagster layer, and no private Dagster API anywhere. Its files by
concern: none over MAX_LINES but the registries of data, and the CLI's verb modules thin (none
imports another verb; what two verbs share is in a helper module)."""

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import pytest

from dagster_project import cli
from dagster_project.settings import PROJECT_ROOT

PACKAGE = PROJECT_ROOT / "dagster_project"
# Lowest first; a module may import its own layer and those below it.
LAYERS = (
    ("settings",),
    ("corpora",),
    ("compute",),
    ("storage",),
    ("presentation",),
    ("defs",),
    ("definitions", "cli"),
    ("api",),  # the notebook API: above everything, so nothing but the package's lazy __getattr__ imports it
)


def module_name(path: Path) -> str:
    parts = path.relative_to(PROJECT_ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path) -> set[str]:
    """Every module named by an import statement of the file (module-level or inside functions)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def layer_of(module: str) -> int:
    top = module.split(".")[1] if "." in module else ""
    return next((rank for rank, names in enumerate(LAYERS) if top in names), len(LAYERS))


DAGSTER_LIBRARIES = ("dagster_duckdb", "dagster_duckdb_polars", "dagster_webserver", "dagster_postgres", "dagster_k8s")
MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def project_imports(path: Path) -> set[str]:
    """The project modules a file imports (a `from package import name` counts as the package)."""
    return {
        next(candidate for candidate in (name, name.rsplit(".", 1)[0]) if candidate in MODULES)
        for name in imported_modules(path)
        if name.startswith("dagster_project.") and (name in MODULES or name.rsplit(".", 1)[0] in MODULES)
    }


def test_every_module_has_a_layer() -> None:
    assert [module for module in MODULES if module != "dagster_project" and layer_of(module) == len(LAYERS)] == []


@pytest.mark.parametrize("module", [name for name in MODULES if name != "dagster_project"])
def test_imports_point_downward(module: str) -> None:
    upward = sorted(name for name in project_imports(MODULES[module]) if layer_of(name) > layer_of(module))
    assert upward == [], f"{module} (layer {LAYERS[layer_of(module)]}) imports from higher layers: {upward}"


def test_only_the_dagster_layer_imports_dagster() -> None:
    below = layer_of("dagster_project.defs")
    offenders = {
        module: sorted(name for name in imported_modules(path) if name.split(".")[0] in ("dagster", *DAGSTER_LIBRARIES))
        for module, path in MODULES.items()
        if layer_of(module) < below
    }
    assert {module: names for module, names in offenders.items() if names} == {}


def test_no_private_dagster_api() -> None:
    files = [*MODULES.values(), *(PROJECT_ROOT / "tests").rglob("*.py"), *(PROJECT_ROOT / "bench").rglob("*.py")]
    private = [
        f"{path.relative_to(PROJECT_ROOT)}: {name}"
        for path in files
        for name in imported_modules(path)
        if name.startswith("dagster._") or ".dagster._" in name
    ]
    assert private == []


def test_no_import_cycles() -> None:
    graph = {module: project_imports(path) - {module} for module, path in MODULES.items()}
    for module, targets in graph.items():  # importing a.b.c first runs a/__init__ and a/b/__init__
        for target in list(targets):
            parts = target.split(".")
            targets |= {
                ".".join(parts[:k])
                for k in range(2, len(parts))
                if not module.startswith(".".join(parts[:k]) + ".") and ".".join(parts[:k]) != module
            }
    try:
        list(TopologicalSorter(graph).static_order())
    except CycleError as error:
        pytest.fail(f"import cycle: {' -> '.join(error.args[1])}")


MAX_LINES = 600
# Declarations of data (one entry per chart), long because the papers have many figures.
REGISTRIES = {"dagster_project.presentation.chart_registry"}


def test_no_module_is_longer_than_the_limit_but_the_registries() -> None:
    lengths = {module: len(path.read_text(encoding="utf-8").splitlines()) for module, path in MODULES.items()}
    assert REGISTRIES <= set(lengths)  # a registry renamed or gone leaves the list too
    assert {module: n for module, n in lengths.items() if n > MAX_LINES and module not in REGISTRIES} == {}


def test_no_cli_verb_module_imports_another() -> None:
    verbs = {module.__name__ for module in cli.VERBS.values()}
    assert len(verbs) == len(cli.VERBS) > 5
    crossing = {verb: sorted(imported_modules(MODULES[verb]) & (verbs - {verb})) for verb in verbs}
    assert {verb: others for verb, others in crossing.items() if others} == {}
