"""Read-only means read-only (storage/backend.py check_read_query, storage/lake.py): `attn-warehouse
sql` and `open_warehouse(...).sql` run one reading statement, on a DuckLake and on the DuckDB
file alike; a read session on a lake holds no secret to attach it again writable. Each statement
below was tried by hand and emptied a lake, or wrote a file, before."""

from pathlib import Path

import duckdb
import polars as pl
import pytest

from dagster_project.api import open_warehouse
from dagster_project.cli.sql import sql
from dagster_project.compute.models import ModelSpec
from dagster_project.storage.backend import BACKEND_SETTING, CATALOG_SETTING, DATA_PATH_SETTING, ReadOnlyQueryError
from dagster_project.storage.model_rows import upsert_model
from dagster_project.storage.partition_writes import replace_partition
from dagster_project.storage.views import apply_views
from tests.warehouse_templates import BACKENDS, Template, build_templates, copy_template

SPEC = ModelSpec("org--m", "org/m", "/x", "r1", "bert", 1, 2, True)
WRITES = [
    "USE memory; DETACH lake; ATTACH 'ducklake:attn_lake' AS rw; DELETE FROM rw.batches; DROP VIEW rw.clark_entropy",
    "USE memory",
    "DETACH lake",
    "ATTACH 'ducklake:attn_lake' AS rw",
    "DELETE FROM batches",
    "DROP VIEW clark_entropy",
    "SELECT 1; DELETE FROM batches",
    "COPY (SELECT * FROM batches) TO '{out}'",
    "COPY batches TO '{out}' (FORMAT parquet)",
    "EXPORT DATABASE '{folder}'",
]
READS = ["SELECT count(*) AS n FROM batches", "WITH b AS (FROM batches) SELECT count(*) FROM b", "DESCRIBE batches"]


def _fill(conn: duckdb.DuckDBPyConnection) -> None:
    apply_views(conn)
    upsert_model(conn, SPEC)
    rows = pl.DataFrame({"example_id": [0], "layer": [1], "head": [1], "n_tokens": [10], "to_cls": [0.5]})
    replace_partition(conn, {"head_summaries": rows.with_columns(pl.col("to_cls").cast(pl.Float32))}, "org--m", "demo")


@pytest.fixture(scope="module")
def templates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Template]:
    return build_templates(tmp_path_factory.mktemp("read-only-templates"), _fill)


@pytest.fixture(params=BACKENDS)
def warehouse(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, templates: dict[str, Template]
) -> str:
    """A warehouse with one batch, configured in the environment; its backend."""
    copy = copy_template(templates[request.param], tmp_path)
    if isinstance(copy, Path):
        monkeypatch.setenv("ATTN_WAREHOUSE", str(copy))
        monkeypatch.delenv(BACKEND_SETTING, raising=False)
    else:
        monkeypatch.setenv(BACKEND_SETTING, "ducklake")
        monkeypatch.setenv(CATALOG_SETTING, copy.catalog)
        monkeypatch.setenv(DATA_PATH_SETTING, copy.data_path)
    return request.param


def _state() -> tuple[int, bool]:
    """The batches and whether a results view is there."""
    with open_warehouse() as reader:
        return reader.sql("SELECT count(*) AS n FROM batches")["n"].item(), "clark_entropy" in reader.views()


@pytest.mark.parametrize("statement", WRITES)
def test_sql_refuses_every_statement_that_writes(
    warehouse: str, statement: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    query = statement.format(out=tmp_path / "out.csv", folder=tmp_path / "export")
    before = _state()
    assert before[0] > 0 and before[1]
    assert sql(query, 10) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: a read-only query is one SELECT") and error.count("\n") == 1
    with open_warehouse() as reader, pytest.raises(ReadOnlyQueryError):
        reader.sql(query)
    assert _state() == before
    assert not (tmp_path / "out.csv").exists() and not (tmp_path / "export").exists()


@pytest.mark.parametrize("query", ["", ";", "  -- nothing\n"])
def test_an_empty_query_is_one_line(warehouse: str, query: str, capsys: pytest.CaptureFixture) -> None:
    assert sql(query, 10) == 2
    assert capsys.readouterr().err == (
        "error: the query is empty: give one SELECT (or WITH, DESCRIBE, SHOW) statement\n"
    )


@pytest.mark.parametrize("query", READS)
def test_reads_still_run(warehouse: str, query: str, capsys: pytest.CaptureFixture) -> None:
    assert sql(query, 10) == 0
    with open_warehouse() as reader:
        assert reader.sql(query).height >= 1


def test_a_read_session_on_a_lake_holds_no_lake_secret(warehouse: str) -> None:
    before = _state()
    with open_warehouse() as reader:
        secrets = reader._conn.execute("SELECT name FROM duckdb_secrets()").fetchall()
        assert ("attn_lake",) not in secrets
        if warehouse == "ducklake":
            # even past the statement check: the lake cannot be attached again, writable
            reader._conn.execute("USE memory")
            reader._conn.execute("DETACH lake")
            with pytest.raises(duckdb.Error, match="attn_lake"):
                reader._conn.execute("ATTACH 'ducklake:attn_lake' AS rw")
    assert _state() == before
