"""`attn-warehouse sql QUERY`: an ad-hoc query on the warehouse opened read-only."""

import argparse
import sys
from typing import TYPE_CHECKING

from dagster_project.cli.common import existing_warehouse, one_line, reader_error

if TYPE_CHECKING:
    import duckdb
    import polars as pl

HELP = "run a query on the warehouse opened read-only and print the result (holds no lock afterwards)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add QUERY and --max-rows."""
    parser.add_argument("query", help='SQL, e.g. "SELECT * FROM models"')
    parser.add_argument("--max-rows", type=int, default=50, help="rows to print at most (default 50)")


def command(args: argparse.Namespace) -> int:
    """Run QUERY and print at most --max-rows rows (at least 1); the exit status."""
    return sql(args.query, max(args.max_rows, 1))


def sql(query: str, max_rows: int) -> int:
    """Run `query` on the warehouse opened read-only, print the result, close: an ad-hoc query
    that does not keep a run from writing once it has printed."""
    import duckdb
    import polars as pl

    from dagster_project.presentation.consistency import replaced_examples_notes
    from dagster_project.storage.backend import ReadOnlyQueryError, check_read_query
    from dagster_project.storage.lake import LakeConfigError, read_retrying

    warehouse = existing_warehouse()
    if warehouse is None:
        return 2
    try:
        with warehouse.connect_read_only() as conn:
            check_read_query(conn, query)
            # a read on a SQLite-catalog lake that meets a writer's commit is read again
            result = read_retrying(conn, query, fetch=lambda found: _first_rows(found, max_rows))
            notes = replaced_examples_notes(conn)
        with pl.Config(tbl_rows=max_rows, tbl_cols=-1, tbl_width_chars=200, fmt_str_lengths=80):
            shown = str(result.head(max_rows))
    except ReadOnlyQueryError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except (duckdb.Error, LakeConfigError, OSError) as error:  # OSError: a lake's data path that fails a read
        return reader_error(error, warehouse)
    except (pl.exceptions.PolarsError, pl.exceptions.PanicException) as error:
        # polars takes no UNION or INTERVAL column, nor an infinite timestamp
        print(
            f"error: cannot print the result ({one_line(error)}): cast that column, e.g. `col::VARCHAR`",
            file=sys.stderr,
        )
        return 2
    print(shown)
    if result.height > max_rows:
        print(f"(first {max_rows} rows; --max-rows to see more)")
    for note in notes:  # facts computed from examples since replaced: the rows above may mix them
        print(note, file=sys.stderr)
    return 0


def _first_rows(result: "duckdb.DuckDBPyConnection", max_rows: int) -> "pl.DataFrame":
    """The first max_rows + 1 rows of an executed query (one more than shown, to say there are more)."""
    import polars as pl
    import pyarrow as pa

    reader = result.to_arrow_reader(max_rows + 1)
    batches, n_rows = [], 0
    for batch in reader:
        batches.append(batch)
        n_rows += batch.num_rows
        if n_rows > max_rows:
            break
    return pl.from_arrow(pa.Table.from_batches(batches, schema=reader.schema))
