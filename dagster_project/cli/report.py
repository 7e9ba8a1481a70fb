"""`attn-warehouse report`: the static HTML report, one page per paper, every registered model."""

import argparse
import sys
from pathlib import Path

from dagster_project import settings
from dagster_project.cli.common import existing_warehouse

HELP = "write the static HTML report (one page per paper, every model)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add --out, the folder for the report's pages."""
    parser.add_argument("--out", type=Path, help="folder for the pages (default: report/ in the charts folder)")


def command(args: argparse.Namespace) -> int:
    """Write the HTML report into --out (default: report/ in the charts folder); the exit status."""
    return report(args.out)


def report(out_dir: Path | None) -> int:
    """Write the static HTML report of every registered model's charts, read from the warehouse."""

    from dagster_project.presentation.report import write_report
    from dagster_project.presentation.report_data import read_report_data
    from dagster_project.storage.lake import LakeConfigError

    warehouse = existing_warehouse()
    if warehouse is None:
        return 2
    try:
        with warehouse.connect_read_only() as conn:
            data = read_report_data(conn)
    except (ValueError, LakeConfigError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    pages = write_report(data, out_dir or settings.charts_dir() / "report")
    print(f"report: {pages[0]} ({len(pages) - 1} paper pages, models: {', '.join(data.models['model_id']) or 'none'})")
    return 0
