"""The attention warehouse. Importing the package sets the process environment that must be in
place before torch is imported, so every entry point (the CLI, Dagster's code server, tests,
benchmarks) gets it by importing anything of the project first or along with torch.

The notebook API (api.py: open_warehouse, Warehouse, example_maps) is reached from here,
`from dagster_project import open_warehouse`, and loaded only on that first use, so importing
the package stays cheap."""

import importlib
import os

# 2-thread torch spins (and slows ~4x) while another process keeps a core busy; PASSIVE makes
# idle OpenMP threads sleep. The OpenMP runtime reads it once, when torch loads it.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

_API = ("open_warehouse", "Warehouse", "example_maps")
__all__ = list(_API)


def __getattr__(name: str) -> object:
    """The API's names, imported on first use (module-level __getattr__, PEP 562)."""
    if name in _API:
        # Imported by name: the API sits above every layer, and a static import here would make
        # the package, which every module imports for the environment above, depend on all of them.
        return getattr(importlib.import_module("dagster_project.api"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
