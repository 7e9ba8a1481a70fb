"""`attn-warehouse export VIEW`: a view or table of the warehouse to a Parquet or CSV file."""

import argparse
import sys
from pathlib import Path

from dagster_project.cli.common import existing_warehouse, reader_error

HELP = "write a view or table of the warehouse to a file"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("view", help="e.g. clark_coreference_heads")
    parser.add_argument("--format", choices=["parquet", "csv"], default="parquet")
    parser.add_argument("--out", type=Path, help="the file to write (default: VIEW.FORMAT here)")
    parser.add_argument("--model", help="only this model_id's rows")


def command(args: argparse.Namespace) -> int:
    return export(args.view, args.format, args.out, args.model)


def export(view: str, file_format: str, out: Path | None, model_id: str | None) -> int:
    """Write a view (or table) of the warehouse, opened read-only, to a Parquet or CSV file."""
    import difflib

    import duckdb

    from dagster_project.storage.lake import LakeConfigError

    warehouse = existing_warehouse()
    if warehouse is None:
        return 2
    out = out or Path(f"{view}.{file_format}")
    try:
        with warehouse.connect_read_only() as conn:
            names = {name for (name,) in conn.execute("SELECT table_name FROM information_schema.tables").fetchall()}
            if view not in names:
                close = difflib.get_close_matches(view, sorted(names), n=3)
                print(
                    f"error: the warehouse has no view or table '{view}'"
                    + (f" (did you mean {', '.join(close)}?)" if close else "")
                    + '; list them with `attn-warehouse sql "SHOW TABLES"`',
                    file=sys.stderr,
                )
                return 2
            relation = conn.table(view)
            if model_id is not None:
                relation = relation.filter(duckdb.ColumnExpression("model_id") == duckdb.ConstantExpression(model_id))
            rows = len(relation)
            if file_format == "parquet":
                relation.write_parquet(str(out))
            else:
                relation.write_csv(str(out))
    except (duckdb.Error, LakeConfigError) as error:
        return reader_error(error, warehouse)
    print(f"{out}: {rows} rows of {view}" + (f" for model {model_id}" if model_id else ""))
    return 0
