"""A reader of the DuckDB file beside a writer (storage/backend.py connect_read_only): the writer
holds the file's lock for each write, and the reader tries again for a few seconds instead of
failing at once (1 read in 5 failed beside a writer before)."""

import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from dagster_project.storage.backend import WarehouseConfig
from tests.servers import stretched

HOLD = """
import sys, time, duckdb
conn = duckdb.connect(sys.argv[1])
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
conn.close()
"""


def hold_lock(path: Path, seconds: float) -> subprocess.Popen:
    """Another process holding the file open for writing for `seconds`, once it says so."""
    writer = subprocess.Popen([sys.executable, "-c", HOLD, str(path), str(seconds)], stdout=subprocess.PIPE, text=True)
    assert writer.stdout.readline().strip() == "locked"
    return writer


@pytest.fixture
def warehouse(tmp_path: Path) -> WarehouseConfig:
    with duckdb.connect(str(tmp_path / "warehouse.duckdb")) as conn:
        conn.execute("CREATE TABLE t AS SELECT 42 AS answer")
    return WarehouseConfig("duckdb", str(tmp_path / "warehouse.duckdb"))


def test_a_reader_waits_for_a_short_write(warehouse: WarehouseConfig) -> None:
    writer = hold_lock(Path(warehouse.database), 1.0)
    started = time.monotonic()
    with warehouse.connect_read_only(wait_seconds=10.0) as conn:
        assert conn.execute("SELECT answer FROM t").fetchone() == (42,)
    assert time.monotonic() - started > 0.3  # it did wait for the writer
    writer.wait(timeout=10)


def test_a_reader_gives_up_after_its_wait(warehouse: WarehouseConfig) -> None:
    writer = hold_lock(Path(warehouse.database), 30.0)
    try:
        started = time.monotonic()
        with pytest.raises(duckdb.IOException, match="(?i)could not set lock"):
            warehouse.connect_read_only(wait_seconds=0.5)
        assert 0.5 <= time.monotonic() - started < stretched(5.0)  # 5 s on a quiet machine
    finally:
        writer.kill()
        writer.wait()
