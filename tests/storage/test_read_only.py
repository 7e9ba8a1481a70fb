"""Read-only means read-only (storage/backend.py check_read_query, storage/lake.py): `attn-warehouse
sql` and `open_warehouse(...).sql` run one reading statement, on a DuckLake and on the DuckDB
file alike; a read session on a lake holds no secret to attach it again writable. Each statement
below was tried by hand and emptied a lake, or wrote a file, before. The reader reads the
warehouse only: no other file, URL or extension (storage/connections.py confine_reader), and no
table function that writes, merges, checkpoints or sets options, refused by name before DuckDB
binds the query (one of them crashed the process)."""

import os
import subprocess
import sys
from pathlib import Path

import duckdb
import polars as pl
import pytest

from dagster_project import settings
from dagster_project.api import open_warehouse
from dagster_project.cli.export import export
from dagster_project.cli.sql import sql
from dagster_project.compute.models import ModelSpec
from dagster_project.storage.backend import BACKEND_SETTING, CATALOG_SETTING, DATA_PATH_SETTING, ReadOnlyQueryError
from dagster_project.storage.lake import LakeConfig, connect_lake
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


# Files and URLs of the machine, not of the warehouse; `{outside}` is a CSV file beside the warehouse.
MACHINE_READS = [
    "SELECT * FROM read_csv('/etc/passwd', header = false)",
    "SELECT * FROM read_text('/etc/hostname')",
    "SELECT * FROM glob('/root/*')",
    "SELECT count(*) AS n FROM read_csv('{outside}')",
    "SELECT * FROM read_blob('{outside}')",
    "SELECT * FROM '{outside}'",
    "WITH f AS (SELECT * FROM glob('{folder}/*')) SELECT count(*) FROM f",
    # no download of the httpfs extension, no request
    "SELECT * FROM read_json('https://example.com/x.json')",
]


@pytest.mark.parametrize("query", MACHINE_READS)
def test_sql_reads_no_file_but_the_warehouses(
    warehouse: str, query: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    outside = tmp_path / "outside.csv"
    outside.write_text("secret\n42\n")
    query = query.format(outside=outside, folder=tmp_path)
    assert sql(query, 10) == 2
    captured = capsys.readouterr()
    assert "42" not in captured.out and captured.err.count("\n") == 1
    assert "file system operations are disabled by configuration: a read-only query reads the warehouse's own" in (
        captured.err
    )
    with open_warehouse() as reader, pytest.raises(duckdb.PermissionException):
        reader.sql(query)


def test_no_setting_reopens_the_machine(warehouse: str, capsys: pytest.CaptureFixture) -> None:
    """The settings are locked: neither a statement (refused anyway) nor the API's connection can
    change them back."""
    with open_warehouse() as reader:
        for setting in ("SET enable_external_access = true", "SET allowed_directories = ['/']", "RESET allowed_paths"):
            with pytest.raises(duckdb.InvalidInputException, match="the configuration has been locked"):
                reader._conn.execute(setting)
        with pytest.raises(duckdb.PermissionException):
            reader._conn.execute("LOAD httpfs")


# Table functions that write, merge, checkpoint, clean up or set options, wherever they appear.
WRITING_FUNCTIONS = [
    ("SELECT count(*) FROM ducklake_merge_adjacent_files('lake')", "ducklake_merge_adjacent_files"),
    ("SELECT * FROM checkpoint('lake')", "checkpoint"),
    ("SELECT * FROM force_checkpoint('lake')", "force_checkpoint"),
    ("SELECT * FROM ducklake_cleanup_old_files('lake', cleanup_all => true)", "ducklake_cleanup_old_files"),
    ("SELECT * FROM ducklake_expire_snapshots('lake', older_than => now())", "ducklake_expire_snapshots"),
    ("SELECT * FROM ducklake_delete_orphaned_files('lake', cleanup_all => true)", "ducklake_delete_orphaned_files"),
    ("SELECT * FROM ducklake_rewrite_data_files('lake')", "ducklake_rewrite_data_files"),
    ("SELECT * FROM ducklake_flush_inlined_data('lake')", "ducklake_flush_inlined_data"),
    ("SELECT * FROM lake.merge_adjacent_files()", "merge_adjacent_files"),
    ("WITH m AS (SELECT * FROM Ducklake_Merge_Adjacent_Files('lake')) SELECT count(*) FROM m", "ducklake_merge"),
    ("SELECT n_tokens, (SELECT count(*) FROM main.CHECKPOINT()) FROM head_summaries", "checkpoint"),
    ("SELECT * FROM batches WHERE batch_id IN (SELECT * FROM force_checkpoint())", "force_checkpoint"),
    ("SELECT * FROM query('SELECT * FROM ducklake_merge_adjacent_files(''lake'')')", "query"),
    ("SELECT * FROM postgres_execute('__ducklake_metadata_lake', 'DELETE FROM ducklake_data_file')", "postgres_exec"),
    ("SELECT * FROM enable_logging()", "enable_logging"),
]


def _lake_files(warehouse: str) -> set[Path]:
    """The files of the lake's data folder (none on the DuckDB backend)."""
    if warehouse == "duckdb":
        return set()
    return {path for path in Path(os.environ["ATTN_LAKE_DATA_PATH"]).rglob("*") if path.is_file()}


@pytest.mark.parametrize(("query", "name"), WRITING_FUNCTIONS)
def test_sql_refuses_every_table_function_that_writes(
    warehouse: str, query: str, name: str, capsys: pytest.CaptureFixture
) -> None:
    before, files = _state(), _lake_files(warehouse)
    assert sql(query, 10) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"error: a read-only query does not call {name}") and error.count("\n") == 1
    with open_warehouse() as reader, pytest.raises(ReadOnlyQueryError, match="does not call"):
        reader.sql(query)
    assert _state() == before and _lake_files(warehouse) == files


@pytest.mark.parametrize(
    "query",
    [
        "SELECT * FROM ducklake_set_option('lake', 'data_inlining_row_limit', 10)",
        "SELECT * FROM (SELECT 1) AS t, lake.SET_OPTION('data_inlining_row_limit', 10)",
    ],
)
def test_setting_a_lake_option_is_refused_before_duckdb_binds_it(
    warehouse: str, query: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DuckDB crashed (a segmentation fault) binding this on a read-only lake: refused by name, in a
    process of its own so that a crash fails only this test."""
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))
    done = subprocess.run(
        [sys.executable, "-m", "dagster_project.cli", "sql", query],
        cwd=settings.PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (done.returncode, done.stdout) == (2, "")
    name = "ducklake_set_option" if "ducklake_set_option" in query else "set_option"
    assert done.stderr == f"error: a read-only query does not call {name}(): it sets options\n"


def test_reads_of_the_lakes_own_functions_and_pragmas_still_run(warehouse: str, capsys: pytest.CaptureFixture) -> None:
    assert sql("PRAGMA table_info('batches')", 10) == 0
    assert "batch_id" in capsys.readouterr().out
    if warehouse == "ducklake":
        assert sql("SELECT count(*) > 0 AS taken FROM ducklake_snapshots('lake')", 10) == 0
        assert "true" in capsys.readouterr().out


def test_export_still_writes_through_the_confined_reader(warehouse: str, tmp_path: Path) -> None:
    out = tmp_path / "batches.csv"
    assert export("batches", "csv", out, None) == 0
    assert pl.read_csv(out).height == _state()[0]
    assert [path.name for path in tmp_path.iterdir() if path.name.startswith(".")] == []  # no part file left


def test_a_lake_file_missing_mid_read_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """A data file the catalog names is gone: the read fails once the rows before it have streamed
    out, where DuckDB's error reaches Python through Arrow as an OSError (a traceback before)."""
    lake = LakeConfig(str(tmp_path / "catalog.ducklake"), str(tmp_path / "data"))
    with connect_lake(lake) as writer:
        writer.execute("CREATE TABLE numbers (n BIGINT)")
        for start in range(0, 1_500_000, 300_000):  # five files, written one after another
            writer.execute("INSERT INTO numbers SELECT * FROM range(?, ?)", [start, start + 300_000])
    files = sorted((tmp_path / "data").rglob("*.parquet"), key=lambda path: path.stat().st_mtime)
    assert len(files) == 5
    files[-1].unlink()
    monkeypatch.setenv(BACKEND_SETTING, "ducklake")
    monkeypatch.setenv(CATALOG_SETTING, lake.catalog)
    monkeypatch.setenv(DATA_PATH_SETTING, lake.data_path)
    assert sql("SELECT n FROM numbers", 2_000_000) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert captured.err.startswith("error: IO Error: Cannot open file") and "No such file or directory" in captured.err
