"""The package declares ranges and CI installs an exact set: pyproject.toml pins nothing with `==`,
each requirement has a lower bound and a ceiling, and constraints.txt (what .ci/run installs with)
holds a version of every requirement that its range admits."""

import tomllib

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from dagster_project import settings

PROJECT = tomllib.loads((settings.PROJECT_ROOT / "pyproject.toml").read_text())["project"]
REQUIREMENTS = [
    Requirement(text)
    for text in [
        *PROJECT["dependencies"],
        *(text for texts in PROJECT["optional-dependencies"].values() for text in texts),
    ]
]


def _constraints() -> dict[str, Version]:
    """constraints.txt: canonical name -> the exact version CI installs."""
    pins = {}
    for line in (settings.PROJECT_ROOT / "constraints.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.partition("==")
            pins[canonicalize_name(name)] = Version(version)
    return pins


@pytest.mark.parametrize("requirement", REQUIREMENTS, ids=str)
def test_each_requirement_is_a_range_from_a_lower_bound_to_a_ceiling(requirement: Requirement) -> None:
    operators = sorted(spec.operator for spec in requirement.specifier)
    assert operators == ["<", ">="], f"{requirement}: declare >=LOWEST,<NEXT_MAJOR, not {operators}"


@pytest.mark.parametrize("requirement", REQUIREMENTS, ids=str)
def test_constraints_pin_a_version_each_range_admits(requirement: Requirement) -> None:
    pinned = _constraints().get(canonicalize_name(requirement.name))
    assert pinned is not None, f"constraints.txt has no {requirement.name}: regenerate it (.ci/constraints.py)"
    assert requirement.specifier.contains(pinned, prereleases=True), (
        f"{requirement.name}=={pinned} is not {requirement}"
    )


def test_constraints_are_exact_versions_of_distinct_packages() -> None:
    lines = [line for line in (settings.PROJECT_ROOT / "constraints.txt").read_text().splitlines() if line.strip()]
    pins = [line for line in lines if not line.startswith("#")]
    assert all(line.count("==") == 1 and " " not in line for line in pins), pins
    assert len(pins) == len(_constraints())  # no package twice
    assert "torch" in _constraints() and _constraints()["torch"] == Version(_constraints()["torch"].public)


def test_ci_installs_from_the_constraints() -> None:
    ci = (settings.PROJECT_ROOT / ".ci" / "run").read_text()
    assert "pip install --quiet -c constraints.txt -e '.[dev,scale,docs]'" in ci
