"""docs/architecture.md's two diagrams against the code: the layers with an arrow for each import
between them that no chain of other arrows already implies (read from the import statements, as
tests/unit/test_layers.py reads them), and the asset groups of the Dagster definitions with an
arrow wherever an asset of one group depends on an asset of another. A test fails, printing the
diagram the code gives, when the page's differs."""

import re
from graphlib import TopologicalSorter

import pytest

from dagster_project.settings import PROJECT_ROOT
from tests.unit.test_layers import LAYERS, MODULES, layer_of, project_imports

PAGE = PROJECT_ROOT / "docs" / "architecture.md"


def diagram_on_page(name: str) -> str:
    """The Mermaid block between `<!-- diagram: NAME -->` and `<!-- /diagram -->`."""
    text = PAGE.read_text(encoding="utf-8")
    found = re.search(rf"<!-- diagram: {name} -->\n```mermaid\n(.*?)```\n<!-- /diagram -->", text, re.DOTALL)
    assert found, f"docs/architecture.md has no `<!-- diagram: {name} -->` block"
    return found[1]


def _without_implied(edges: set[tuple[str, str]]) -> list[tuple[str, str]]:
    """The edges of a DAG that no other path between their ends implies (its transitive reduction)."""

    def reaches(start: str, end: str, skipped: tuple[str, str]) -> bool:
        stack, seen = [start], {start}
        while stack:
            node = stack.pop()
            for edge in edges - {skipped}:
                if edge[0] == node and edge[1] not in seen:
                    if edge[1] == end:
                        return True
                    seen.add(edge[1])
                    stack.append(edge[1])
        return False

    return sorted(edge for edge in edges if not reaches(*edge, edge))


def _layer_label(names: tuple[str, ...]) -> str:
    """The layer's files and folders: `settings.py`, `corpora/`."""
    paths = (MODULES[f"dagster_project.{name}"] for name in names)
    return ", ".join(f"{path.parent.name}/" if path.name == "__init__.py" else path.name for path in paths)


def layers_diagram() -> str:
    nodes = {names[0]: names for names in LAYERS}
    edges = {
        (LAYERS[layer_of(module)][0], LAYERS[layer_of(imported)][0])
        for module, path in MODULES.items()
        if module != "dagster_project"
        for imported in project_imports(path)
        if imported != "dagster_project" and layer_of(imported) != layer_of(module)
    }
    lines = ["flowchart TB"]
    lines += [f'    {node}["{_layer_label(names)}"]' for node, names in reversed(nodes.items())]
    lines += [f"    {importer} --> {imported}" for importer, imported in _without_implied(edges)]
    return "\n".join(lines) + "\n"


def asset_graph_diagram() -> str:
    from dagster_project.definitions import defs

    graph = defs.resolve_asset_graph()
    group = {key: graph.get(key).group_name for key in graph.get_all_asset_keys()}
    edges = {
        (group[parent], group[key])
        for key in group
        for parent in graph.get(key).parent_keys
        if group[parent] != group[key]
    }
    order = TopologicalSorter({name: set() for name in sorted(set(group.values()))} | _upstream(edges))
    lines = ["flowchart LR"]
    lines += [f"    {name}" for name in order.static_order()]
    lines += [f"    {upstream} --> {downstream}" for upstream, downstream in sorted(edges)]
    return "\n".join(lines) + "\n"


def _upstream(edges: set[tuple[str, str]]) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for upstream, downstream in sorted(edges):
        found.setdefault(downstream, set()).add(upstream)
    return found


def test_the_layers_diagram_is_the_import_graph() -> None:
    expected = layers_diagram()
    assert diagram_on_page("layers") == expected, f"docs/architecture.md's layers diagram should be:\n{expected}"


def test_the_diagram_arrows_leave_out_what_a_chain_implies() -> None:
    edges = {("defs", "storage"), ("storage", "compute"), ("defs", "compute"), ("cli", "compute")}
    assert _without_implied(edges) == [("cli", "compute"), ("defs", "storage"), ("storage", "compute")]


@pytest.mark.slow
def test_the_asset_graph_diagram_is_the_definitions_groups() -> None:
    expected = asset_graph_diagram()
    assert diagram_on_page("asset-groups") == expected, f"docs/architecture.md's asset graph should be:\n{expected}"
