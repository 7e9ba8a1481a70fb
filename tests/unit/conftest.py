"""The unit tests' warehouse: `conn`, a DuckDB file with every table and view (a copy of a
template built once per test process, tests/warehouse_templates.py)."""

from tests.warehouse_templates import conn, duckdb_template  # noqa: F401  (fixtures)
