"""`attn-warehouse ui`: the Dagster UI on 127.0.0.1, on this project's instance."""

import argparse
import os
import sys
from pathlib import Path

from dagster_project import settings

HELP = "start the Dagster UI on 127.0.0.1"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add --port (default 3000)."""
    parser.add_argument("--port", type=int, default=3000)


def command(args: argparse.Namespace) -> int:
    """Start the Dagster UI on --port, in place of this process."""
    return ui(args.port)


def ui(port: int) -> int:
    """End the runs a killed UI left in progress, then replace this process with `dagster dev` on
    127.0.0.1:`port`, with the user's workspace.yaml (else the shipped one)."""
    from dagster import DagsterInstance

    from dagster_project.cli.recovery import reclaim_dead_runs

    with DagsterInstance.get() as instance:  # runs of a killed `dagster dev` stay STARTED otherwise
        for message in reclaim_dead_runs(instance):
            print(message)
    workspace = settings.home() / "workspace.yaml"  # the user's (attn-warehouse init), else the shipped one
    if not workspace.exists():
        workspace = settings.SHIPPED_DIR / "workspace.yaml"
    dagster = str(Path(sys.executable).with_name("dagster"))  # the one installed beside this Python
    os.execv(dagster, [dagster, "dev", "-w", str(workspace), "-h", "127.0.0.1", "-p", str(port)])
