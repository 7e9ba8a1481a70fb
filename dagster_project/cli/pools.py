"""`attn-warehouse pools`: the pools' limits on the Dagster instance, set once before the first run."""

import argparse
import os
import sys

HELP = "set the pools' limits on the Dagster instance (once, before the first run)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add --gpus, the devices the gpu pool shares."""
    parser.add_argument(
        "--gpus",
        type=int,
        help="devices the gpu pool shares (non-duckdb backends; default: this machine's CUDA devices, or 1)",
    )


def command(args: argparse.Namespace) -> int:
    """Set the pools' limits for the parsed --gpus; the exit status."""
    return pools(args.gpus)


def pools(gpus: int | None) -> int:
    """Set the limits of the pools the assets use (defs/pools.py) on the Dagster instance, before
    the first run: on a Postgres instance two runs meeting a new pool at once race on creating it."""
    from dagster import DagsterInstance

    from dagster_project.defs.pools import pool_limits, set_pool_limits
    from dagster_project.storage.backend import warehouse_backend

    try:
        limits = pool_limits(gpus)
        with DagsterInstance.get() as instance:
            limits = set_pool_limits(instance, limits)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    for pool, limit in limits.items():
        print(f"pool {pool}: limit {limit}")
    print(f"(warehouse backend {warehouse_backend()}; Dagster instance {os.environ['DAGSTER_HOME']})")
    return 0
