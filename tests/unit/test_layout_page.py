"""docs/layout.md against the tree: every module of the package, every SQL and test folder and
every benchmark is listed, and every path it lists exists."""

import re

from dagster_project.settings import PROJECT_ROOT

PAGE = (PROJECT_ROOT / "docs" / "layout.md").read_text(encoding="utf-8")
LISTED = set(re.findall(r"^\| `([^`]+)`", PAGE, flags=re.MULTILINE))


def test_every_module_and_folder_is_listed() -> None:
    package = PROJECT_ROOT / "dagster_project"
    modules = {
        f"{path.parent.relative_to(PROJECT_ROOT)}/"
        if path.name == "__init__.py"
        else str(path.relative_to(PROJECT_ROOT))
        for path in package.rglob("*.py")
        if path.name != "__main__.py" and path.parent != package or path.name not in ("__init__.py", "__main__.py")
    }
    folders = {
        f"{path.relative_to(PROJECT_ROOT)}/"
        for root in ("sql", "tests")
        for path in (PROJECT_ROOT / root).iterdir()
        if path.is_dir() and path.name != "__pycache__"
    }
    benches = {str(path.relative_to(PROJECT_ROOT)) for path in (PROJECT_ROOT / "bench").glob("bench*.py")}
    assert (modules | folders | benches) - LISTED == set()


def test_every_listed_path_exists() -> None:
    assert {path for path in LISTED if not (PROJECT_ROOT / path).exists()} == set()
