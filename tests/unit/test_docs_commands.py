"""The commands of the README and the docs pages fit their code blocks: at 1280 px a block shows
about 90 columns and cuts the rest off (mkdocs-material scrolls it sideways, GitHub too), so a
longer command is wrapped with `\\` continuation lines. A line of at most two words (an option and
a value that has no space to wrap at) and a comment line may be longer."""

from pathlib import Path

import pytest

from dagster_project.settings import PROJECT_ROOT

COLUMNS = 90
PAGES = [PROJECT_ROOT / "README.md", *sorted((PROJECT_ROOT / "docs").rglob("*.md"))]


def shell_lines(page: Path) -> list[tuple[int, str]]:
    """(line number, line) of every line inside the page's bash code blocks."""
    found, language = [], None
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        if line.lstrip().startswith("```"):
            language = None if language is not None else line.strip().removeprefix("```")
        elif language in ("bash", "sh"):
            found.append((number, line))
    return found


def too_long(line: str) -> bool:
    return len(line) > COLUMNS and not line.lstrip().startswith("#") and len(line.split()) > 2


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(PROJECT_ROOT)))
def test_every_command_fits_its_code_block(page: Path) -> None:
    assert [f"line {number}: {line}" for number, line in shell_lines(page) if too_long(line)] == []


def test_a_long_command_is_too_long_and_a_wrapped_one_is_not() -> None:
    long = ".venv/bin/attn-warehouse run --corpus glue_mrpc --analysis finetuning --set finetuned_mrpc.max_steps=40"
    assert too_long(long)
    assert not any(too_long(part) for part in long.replace(" --set", " \\\n    --set").splitlines())
    assert not too_long("  -o custom-columns='" + "x" * 100 + "'")
