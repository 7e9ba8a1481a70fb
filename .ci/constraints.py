"""Print the constraints file: the exact version installed in this environment of every package the
project needs, with its extras (pyproject.toml's ranges, then what those packages require, all the
way down). After an upgrade that passed the suite: `.venv/bin/python .ci/constraints.py > constraints.txt`."""

import sys
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

PROJECT = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())["project"]
HEADER = """\
# The exact versions CI installs and tests (pip install -c constraints.txt -e '.[dev,scale,docs]');
# pyproject.toml declares the ranges. Written by .ci/constraints.py from an environment that passed
# the suite: regenerate it there after an upgrade.
"""


def closure() -> dict[str, str]:
    """Canonical name -> installed version of every distribution the project's requirements reach."""
    pending = [(Requirement(text), None) for text in PROJECT["dependencies"]]
    pending += [(Requirement(text), None) for texts in PROJECT["optional-dependencies"].values() for text in texts]
    found: dict[str, str] = {}
    seen: set[tuple[str, frozenset[str]]] = set()
    while pending:
        requirement, extra = pending.pop()
        if requirement.marker and not requirement.marker.evaluate({"extra": extra or ""}):
            continue
        name = canonicalize_name(requirement.name)
        if (name, frozenset(requirement.extras)) in seen:
            continue
        seen.add((name, frozenset(requirement.extras)))
        distribution = metadata.distribution(name)
        # the public version: ==2.13.0 matches the +cpu build here and PyPI's build elsewhere
        found[name] = Version(distribution.version).public
        for text in distribution.requires or []:
            needed = Requirement(text)
            # the extras asked for bring their requirements; markers on the rest say where they apply
            for wanted in [None, *requirement.extras]:
                pending.append((needed, wanted))
    return found


def main() -> None:
    versions = closure()
    sys.stdout.write(HEADER + "".join(f"{name}=={versions[name]}\n" for name in sorted(versions)))


if __name__ == "__main__":
    main()
