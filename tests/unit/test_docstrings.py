"""Every public function of the computation, storage, notebook API and CLI layers has a docstring,
read from the source with `ast` (nothing is imported). Public: a module-level function, or a method
of a public class, whose name does not start with `_`; dunder methods, `@overload` stubs and
property setters/deleters are left out, and functions nested in functions are not public."""

import ast
from collections.abc import Iterator
from pathlib import Path

from dagster_project.settings import PROJECT_ROOT

PACKAGE = PROJECT_ROOT / "dagster_project"
DOCUMENTED = (PACKAGE / "compute", PACKAGE / "storage", PACKAGE / "api.py", PACKAGE / "cli")

Function = ast.FunctionDef | ast.AsyncFunctionDef


def source_files() -> list[Path]:
    """The .py files under DOCUMENTED."""
    return [path for root in DOCUMENTED for path in ([root] if root.is_file() else sorted(root.rglob("*.py")))]


def decorator_name(decorator: ast.expr) -> str:
    """The dotted name a decorator is written with, without its call's arguments (`typing.overload`)."""
    node = decorator.func if isinstance(decorator, ast.Call) else decorator
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def exempt(function: Function) -> bool:
    """Whether a public-looking function needs no docstring: a dunder method, an overload stub, or
    a property's setter or deleter (the getter documents the property)."""
    if function.name.startswith("__") and function.name.endswith("__"):
        return True
    names = [decorator_name(decorator) for decorator in function.decorator_list]
    return any(name.split(".")[-1] in ("overload", "setter", "deleter") for name in names)


def public_functions(body: list[ast.stmt]) -> Iterator[Function]:
    """The public functions defined directly in a module's or a public class's body, and those of
    the public classes nested in it."""
    for node in body:
        if isinstance(node, Function) and not node.name.startswith("_") and not exempt(node):
            yield node
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            yield from public_functions(node.body)


def undocumented(path: Path, root: Path = PROJECT_ROOT) -> list[str]:
    """`path:line name` for each public function of the file without a docstring, the path relative to `root`."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return [
        f"{path.relative_to(root)}:{function.lineno} {function.name}"
        for function in public_functions(tree.body)
        if ast.get_docstring(function) is None
    ]


def test_public_functions_have_docstrings():
    missing = [entry for path in source_files() for entry in undocumented(path)]
    assert not missing, f"{len(missing)} public functions without a docstring:\n" + "\n".join(missing)


def test_the_walk_finds_what_it_should(tmp_path):
    """The walk itself: one missing docstring of each public kind is found, and nothing exempt is."""
    source = tmp_path / "sample.py"
    source.write_text(
        "from typing import overload\n"
        "def bare(): pass\n"
        "def documented():\n    '''Yes.'''\n"
        "def _private(): pass\n"
        "def outer():\n    '''Yes.'''\n    def inner(): pass\n"
        "class Public:\n"
        "    def method(self): pass\n"
        "    def __init__(self): pass\n"
        "    def _helper(self): pass\n"
        "    @overload\n    def stub(self, x: int) -> int: ...\n"
        "    @property\n    def size(self):\n        '''Yes.'''\n"
        "    @size.setter\n    def size(self, value): pass\n"
        "    class Nested:\n        def deep(self): pass\n"
        "class _Private:\n    def method(self): pass\n",
        encoding="utf-8",
    )
    assert undocumented(source, tmp_path) == ["sample.py:2 bare", "sample.py:10 method", "sample.py:21 deep"]
