"""A writer killed with SIGKILL in the middle of its write transaction (its rows inserted, its
batch not yet recorded, nothing committed) leaves no partial batch visible, on the DuckDB file
and on DuckLake (PostgreSQL catalog, S3 data), and the next write goes through."""

import os
import signal
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import polars as pl
import pytest

from dagster_project.storage.backend import WarehouseConfig
from dagster_project.storage.lake import LakeConfig, connect_lake, maintain_files
from dagster_project.storage.partition_writes import replace_partition
from dagster_project.storage.views import apply_views
from tests.servers import S3Server

# Writes the partition's second batch through a connection that stops inside the write
# transaction, right before recording the batch, and says so on stdout.
WRITER = """
import sys, time
import duckdb
import polars as pl
from dagster_project.storage.lake import LakeConfig, connect_lake
from dagster_project.storage.partition_writes import replace_partition

class PausingConnection:
    def __init__(self, conn):
        self._conn = conn

    def execute(self, query, *args):
        if query.startswith("INSERT INTO batches"):
            print("mid-write", flush=True)
            time.sleep(600)
        return self._conn.execute(query, *args)

    def __getattr__(self, name):
        return getattr(self._conn, name)

backend, target, data_path = sys.argv[1:4]
conn = duckdb.connect(target) if backend == "duckdb" else connect_lake(LakeConfig(target, data_path))
frame = pl.DataFrame({"example_id": range(50), "layer": 1, "head": 1, "n_tokens": 7})
replace_partition(PausingConnection(conn), {"head_summaries": frame, "position_histograms": pl.DataFrame(
    {"example_id": [0], "kind": "attention", "scope": "all", "layer": 1, "head": 1, "offset": 0,
     "weight_sum": 1.0, "pair_count": 1})}, "org--m", "demo")
"""


def _first_batch() -> pl.DataFrame:
    return pl.DataFrame({"example_id": [0, 1], "layer": 1, "head": 1, "n_tokens": 5})


@pytest.fixture(params=["duckdb", "ducklake"])
def warehouse(request, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[WarehouseConfig, S3Server | None]:
    if request.param == "duckdb":
        return WarehouseConfig("duckdb", str(tmp_path / "warehouse.duckdb")), None
    postgres_url = request.getfixturevalue("postgres_url")
    s3_server: S3Server = request.getfixturevalue("s3_server")
    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)
    lake = LakeConfig(postgres_url, f"s3://{s3_server.create_bucket()}/lake/")
    return WarehouseConfig("ducklake", "", lake), s3_server


def _connect(config: WarehouseConfig):
    import duckdb

    return connect_lake(config.lake) if config.lake else duckdb.connect(config.database)


def test_a_write_killed_midway_leaves_no_partial_batch(warehouse, tmp_path: Path):
    config, s3_server = warehouse
    with _connect(config) as conn:
        apply_views(conn)
        conn.execute("INSERT INTO models VALUES ('org--m', 'org/m', '/x', NULL, 'bert', 1, 1, TRUE, now(), NULL)")
        replace_partition(conn, {"head_summaries": _first_batch()}, "org--m", "demo")
    target = config.lake.catalog if config.lake else config.database
    data_path = config.lake.data_path if config.lake else ""
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, config.backend, target, data_path],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    try:
        line = writer.stdout.readline()
        assert line == "mid-write\n", writer.stderr.read()
    finally:
        os.kill(writer.pid, signal.SIGKILL)
        writer.wait()
    assert writer.returncode == -signal.SIGKILL
    with _connect(config) as conn:
        staged = conn.execute("SELECT list(example_id ORDER BY example_id) FROM stg_head_summaries").fetchone()
        assert staged == ([0, 1],)
        # nothing of the killed batch anywhere: not in the tables, not in `batches`
        assert conn.execute("SELECT count(*) FROM head_summaries").fetchone() == (2,)
        assert conn.execute("SELECT count(*) FROM position_histograms").fetchone() == (0,)
        # (the first write's batch, and its aggregates' (agg_*) batch beside it)
        assert conn.execute(
            "SELECT count(*), count(DISTINCT batch_id) FROM batches WHERE NOT starts_with(table_name, 'agg_')"
        ).fetchone() == (1, 1)
        if s3_server is not None:
            bucket = config.lake.data_path.split("/")[2]
            # the killed writer's Parquet files are on S3, referenced by nothing; maintenance removes them
            assert len(s3_server.keys(bucket, "lake/main/position_histograms/")) == 1
            assert maintain_files(conn, keep=timedelta(0), orphan_floor=timedelta(0))["deleted_orphaned_files"] >= 2
            assert s3_server.keys(bucket, "lake/main/position_histograms/") == []
        frame = pl.DataFrame({"example_id": [7], "layer": 1, "head": 1, "n_tokens": 3})
        assert replace_partition(conn, {"head_summaries": frame}, "org--m", "demo") == {"head_summaries": 1}
        assert conn.execute("SELECT list(example_id) FROM stg_head_summaries").fetchone() == ([7],)
