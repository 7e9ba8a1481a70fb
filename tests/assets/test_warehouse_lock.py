"""DuckDB's one-writer lock held by another process: writers wait, saying so, then fail with
one line on what to do; `attn-warehouse sql` reads beside such a holder."""

import logging
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb
import pytest
from dagster import materialize

from dagster_project.cli import main
from dagster_project.defs.assets import warehouse_views
from dagster_project.defs.resources import WarehouseResource, lock_timeout_from_env
from dagster_project.storage.connections import LOCK_WAIT_MESSAGE, WarehouseLockedError

# Opens the file read-only, says so, and holds it until its stdin closes: a notebook or DuckDB CLI left open.
HOLDER = """
import sys, duckdb
conn = duckdb.connect(sys.argv[1], read_only=True)
print("ready", flush=True)
sys.stdin.read()
"""


@contextmanager
def held_by_another_process(database: Path) -> Iterator[subprocess.Popen]:
    if not database.exists():
        duckdb.connect(str(database)).close()
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(database)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "ready"
        yield holder
    finally:
        if not holder.stdin.closed:
            holder.stdin.close()
        holder.wait(timeout=60)


def _assert_says_what_to_do(message: str, database: Path, holder: subprocess.Popen) -> None:
    assert message.startswith(f"the warehouse {database} is still locked by another process (PID {holder.pid}, ")
    assert "close that connection (a DuckDB CLI, notebook or script holding the file)" in message
    assert '`attn-warehouse sql "<query>"`' in message
    assert "\n" not in message


def test_a_writer_waits_for_another_process_then_says_what_to_do(tmp_path: Path, caplog: pytest.LogCaptureFixture):
    database = tmp_path / "warehouse.duckdb"
    warehouse = WarehouseResource(database=str(database), lock_timeout_seconds=1.0)
    with held_by_another_process(database) as holder, caplog.at_level(logging.INFO):
        started = time.monotonic()
        with pytest.raises(WarehouseLockedError) as raised, warehouse.get_connection():
            pass
        assert time.monotonic() - started >= 1.0
    _assert_says_what_to_do(str(raised.value), database, holder)
    assert "after 1 s" in str(raised.value)
    waits = [record for record in caplog.records if LOCK_WAIT_MESSAGE in record.getMessage()]
    assert waits and all(record.levelno == logging.INFO for record in waits)


def test_a_writer_gets_the_file_once_the_other_process_closes_it(tmp_path: Path, caplog: pytest.LogCaptureFixture):
    database = tmp_path / "warehouse.duckdb"
    warehouse = WarehouseResource(database=str(database), lock_timeout_seconds=60)
    with held_by_another_process(database) as holder, caplog.at_level(logging.INFO):
        threading.Timer(1.0, holder.stdin.close).start()
        with warehouse.get_connection() as conn:
            conn.execute("CREATE TABLE written AS SELECT 1 AS x")
    assert any(LOCK_WAIT_MESSAGE in record.getMessage() for record in caplog.records)
    with duckdb.connect(str(database), read_only=True) as conn:
        assert conn.execute("SELECT x FROM written").fetchall() == [(1,)]


def test_a_run_fails_with_the_lock_message(tmp_path: Path, resources: dict):
    database = tmp_path / "warehouse.duckdb"
    resources = {**resources, "warehouse": WarehouseResource(database=str(database), lock_timeout_seconds=0.5)}
    with held_by_another_process(database) as holder:
        result = materialize([warehouse_views], resources=resources, raise_on_error=False)
    assert not result.success
    error = result.get_step_failure_events()[0].step_failure_data.error
    while error.cls_name != "WarehouseLockedError":
        error = error.cause
    _assert_says_what_to_do(error.message.strip().split(": ", 1)[1], database, holder)


def test_the_cli_takes_the_timeout_from_the_environment_and_prints_one_line(
    tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
):
    database = tmp_path / "warehouse.duckdb"
    monkeypatch.setenv("ATTN_WAREHOUSE", str(database))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))
    monkeypatch.setenv("ATTN_LOCK_TIMEOUT_SECONDS", "0.5")
    with held_by_another_process(database) as holder:
        assert main(["add-model", str(tiny_model_dir)]) == 1
        # reading beside the other reader works, and needs no wait
        assert main(["sql", "SELECT 42 AS answer"]) == 0
    captured = capsys.readouterr()
    assert "42" in captured.out
    (line,) = [line for line in captured.err.splitlines() if line.startswith("error: ")]
    _assert_says_what_to_do(line.removeprefix("error: "), database, holder)
    assert "after 0.5 s" in line


def test_lock_timeout_from_env(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("ATTN_LOCK_TIMEOUT_SECONDS", raising=False)
    assert lock_timeout_from_env() == 300
    assert WarehouseResource(database="x.duckdb").lock_timeout() == 300
    monkeypatch.setenv("ATTN_LOCK_TIMEOUT_SECONDS", "2.5")
    assert WarehouseResource(database="x.duckdb").lock_timeout() == 2.5
    assert WarehouseResource(database="x.duckdb", lock_timeout_seconds=7).lock_timeout() == 7
    monkeypatch.setenv("ATTN_LOCK_TIMEOUT_SECONDS", "soon")
    with pytest.raises(ValueError, match="ATTN_LOCK_TIMEOUT_SECONDS='soon' is not a number of seconds"):
        lock_timeout_from_env()
