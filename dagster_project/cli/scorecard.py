"""`attn-warehouse scorecard [MODEL]`: every paper claim's verdict per model, the paper's number
beside the model's (sql/results/reproduction_scorecard.sql, presentation/scorecard.py)."""

import argparse
import sys

from dagster_project.cli.common import existing_warehouse, reader_error

HELP = "every paper claim judged per model: the paper's number, the model's, holds / fails / not comparable / missing"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", nargs="?", help="hub id, path or model_id as registered (default: every model)")
    parser.add_argument("--paper", choices=("clark", "kovaleva", "pascual"), help="one paper's claims")
    parser.add_argument("--format", choices=("table", "csv", "markdown"), default="table", dest="output")


def command(args: argparse.Namespace) -> int:
    import duckdb

    from dagster_project.presentation.scorecard import SCORECARD_VIEW, format_scorecard, scorecard_rows
    from dagster_project.storage.lake import LakeConfigError

    warehouse = existing_warehouse()
    if warehouse is None:
        return 2
    try:
        with warehouse.connect_read_only() as conn:
            present = {name for (name,) in conn.execute("SELECT table_name FROM information_schema.tables").fetchall()}
            if SCORECARD_VIEW not in present:
                print(
                    f"error: the warehouse {warehouse.database} has no {SCORECARD_VIEW} view yet (its views come from "
                    "older code): `attn-warehouse run` recreates the views",
                    file=sys.stderr,
                )
                return 2
            rows = scorecard_rows(conn, args.model, args.paper)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except (duckdb.Error, LakeConfigError) as error:
        return reader_error(error, warehouse)
    if rows.is_empty():
        print("no models registered yet: `attn-warehouse run` registers the default model", file=sys.stderr)
        return 1
    print(format_scorecard(rows, args.output), end="")
    return 0
