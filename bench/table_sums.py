"""Row count and the sum of every numeric column of every warehouse table, one line per table: a
fingerprint to compare two warehouses built by different code from the same inputs (a refactor
must leave every line unchanged). Bookkeeping columns (batch ids, write times) are left out.

Usage: .venv/bin/python -m bench.table_sums WAREHOUSE.duckdb [OTHER.duckdb]  (two: prints differences)
"""

import argparse
import math

import duckdb

NUMERIC = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT")
FLOATS = ("FLOAT", "DOUBLE", "DECIMAL")
SKIPPED = {"batches"}  # ids and times of writes: differ between any two runs


def table_sums(path: str) -> dict[str, dict[str, float]]:
    """{table: {"rows": n, column: sum, ...}} for every base table of the warehouse at `path`."""
    with duckdb.connect(path, read_only=True) as conn:
        tables = [
            name
            for (name,) in conn.execute(
                "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() ORDER BY 1"
            ).fetchall()
            if name not in SKIPPED
        ]
        sums = {}
        for table in tables:
            columns = conn.execute(
                "SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = ? "
                "AND database_name = current_database() ORDER BY column_index",
                [table],
            ).fetchall()
            numeric = [name for name, kind in columns if kind.startswith(NUMERIC + FLOATS) and not kind.endswith("]")]
            lists = [name for name, kind in columns if kind.endswith("[]") and kind.startswith(NUMERIC + FLOATS)]
            selects = ["count(*)"]
            selects += [f'sum("{name}")::DOUBLE' for name in numeric]
            selects += [f'sum(list_sum("{name}"))::DOUBLE' for name in lists]
            values = conn.execute(f'SELECT {", ".join(selects)} FROM "{table}"').fetchone()
            sums[table] = dict(zip(["rows", *numeric, *(f"{name}[]" for name in lists)], values))
    return sums


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("warehouses", nargs="+")
    args = parser.parse_args()
    first = table_sums(args.warehouses[0])
    if len(args.warehouses) == 1:
        for table, values in first.items():
            print(table, values)
        return
    second = table_sums(args.warehouses[1])
    differing = 0
    for table in sorted(set(first) | set(second)):
        a, b = first.get(table), second.get(table)
        if a is None or b is None:
            print(f"{table}: only in {'the second' if a is None else 'the first'}")
            differing += 1
            continue
        for column in sorted(set(a) | set(b)):
            x, y = a.get(column), b.get(column)
            same = x == y or (x is not None and y is not None and math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-9))
            if not same:
                print(f"{table}.{column}: {x} vs {y}")
                differing += 1
    print(f"{len(first)} tables compared, {differing} differences")


if __name__ == "__main__":
    main()
