"""Benchmarks, run as modules (`python -m bench.bench_facts`) so that this runs first: importing
dagster_project sets the process environment torch needs before it is loaded."""

import dagster_project  # noqa: F401
