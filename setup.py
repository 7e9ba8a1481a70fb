"""Build hook: the wheel carries what the project ships beside its package, the repository's
top-level sql/, the starter files `attn-warehouse init` writes (models.toml, workspace.yaml) and the
instance settings every new Dagster home starts from (dagster_instance.yaml), as dagster_project/shipped/
(dagster_project/settings.py reads them there).
An editable install reads them where the repository keeps them, so it copies nothing."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

SHIPPED = ("sql", "models.toml", "workspace.yaml", "dagster_instance.yaml")


class BuildPyWithShipped(build_py):
    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return
        target = Path(self.build_lib) / "dagster_project" / "shipped"
        # build_lib outlives a build: a view removed since the last one must not ship again
        shutil.rmtree(target, ignore_errors=True)
        for name in SHIPPED:
            source, copy = Path(name), target / name
            copy.parent.mkdir(parents=True, exist_ok=True)
            if source.is_dir():
                shutil.copytree(source, copy, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy2(source, copy)


setup(cmdclass={"build_py": BuildPyWithShipped})
