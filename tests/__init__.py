"""Imported before any test module or conftest: the project's process environment (set when
dagster_project is imported) is in place before torch loads, and no hub is asked for models."""

import os

import dagster_project  # noqa: F401  (its import sets OMP_WAIT_POLICY before torch is loaded)

# No hub is reachable in tests; fail fast instead of retrying the network for unknown ids.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
