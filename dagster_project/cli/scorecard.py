"""`attn-warehouse scorecard [MODEL]`: every paper claim's verdict per model, the paper's number
beside the model's (sql/results/reproduction_scorecard.sql, presentation/scorecard.py); with
`--matrix`, every model side by side, one verdict per claim (sql/results/scorecard_matrix.sql)."""

import argparse
import sys

from dagster_project.cli.common import existing_warehouse, reader_error

HELP = "every paper claim judged per model: the paper's number, the model's, holds / fails / not comparable / missing"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add MODEL, --paper, --format (table, csv or markdown) and --matrix."""
    parser.add_argument("model", nargs="?", help="hub id, path or model_id as registered (default: every model)")
    parser.add_argument("--paper", choices=("clark", "kovaleva", "pascual"), help="one paper's claims")
    parser.add_argument("--format", choices=("table", "csv", "markdown"), default="table", dest="output")
    parser.add_argument(
        "--matrix",
        action="store_true",
        help="every model side by side (each random-init control after its base): a verdict per claim and model, "
        "and per model the count of each verdict",
    )


def command(args: argparse.Namespace) -> int:
    """Print the claims' verdicts from the warehouse opened read-only: for MODEL or every model, or every
    model side by side (--matrix); 2 for bad input or a warehouse without the view, 1 when no model is
    registered."""
    import duckdb

    from dagster_project.presentation.consistency import replaced_examples_notes
    from dagster_project.presentation.scorecard import (
        MATRIX_VIEW,
        SCORECARD_VIEW,
        format_matrix,
        format_scorecard,
        matrix_rows,
        scorecard_rows,
    )
    from dagster_project.storage.lake import LakeConfigError

    if args.matrix and args.model is not None:
        print(
            f"error: --matrix shows every model side by side: drop {args.model!r}, or leave out --matrix for its rows",
            file=sys.stderr,
        )
        return 2
    view = MATRIX_VIEW if args.matrix else SCORECARD_VIEW
    warehouse = existing_warehouse()
    if warehouse is None:
        return 2
    try:
        with warehouse.connect_read_only() as conn:
            present = {name for (name,) in conn.execute("SELECT table_name FROM information_schema.tables").fetchall()}
            if view not in present:
                print(
                    f"error: the warehouse {warehouse.database} has no {view} view yet (its views come from "
                    "older code): `attn-warehouse run` recreates the views",
                    file=sys.stderr,
                )
                return 2
            rows = matrix_rows(conn, args.paper) if args.matrix else scorecard_rows(conn, args.model, args.paper)
            notes = replaced_examples_notes(conn)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except (duckdb.Error, LakeConfigError) as error:
        return reader_error(error, warehouse)
    if rows.is_empty():
        print("no models registered yet: `attn-warehouse run` registers the default model", file=sys.stderr)
        return 1
    print((format_matrix if args.matrix else format_scorecard)(rows, args.output), end="")
    for note in notes:  # facts computed from examples since replaced: their verdicts may mix the two
        print(note, file=sys.stderr)
    return 0
