"""Model partitions materialized at once by separate processes, with a read-only reader
polling the warehouse: two runs against one DuckDB file (one writer at a time, no lost rows,
no deadlock), and four runs writing a DuckLake with a PostgreSQL catalog and S3 data at the
same time (no aborted or retried write, no lost or duplicated rows). Readers only ever see
whole partitions."""

import os
import subprocess
import sys
import time
from pathlib import Path

import duckdb

from dagster_project.storage.lake import LakeConfig, connect_lake
from dagster_project.storage.views import apply_views
from tests.servers import S3Server

WRITER = """
import logging
import sys
from dagster import AssetSelection, DagsterInstance, materialize
from dagster_duckdb import DuckDBResource
from dagster_project.defs.assets import (
    all_assets,
    corpus_assets_by_name,
    encoder_model,
    fact_assets_by_corpus,
    warehouse_views,
)
from dagster_project.defs.registration import register_model
from dagster_project.defs.resources import ChartFolder, ComputeResource, DataDirectory, WarehouseResource

logging.basicConfig(level=logging.WARNING)  # a retried DuckLake transaction is logged, and counted by the test
model, backend, target, data_path, charts = sys.argv[1:6]
warehouse = (
    DuckDBResource(database=target)
    if backend == "duckdb"
    else WarehouseResource(database="", backend=backend, lake_catalog=target, lake_data_path=data_path)
)
resources = {
    "warehouse": warehouse,
    "data_dir": DataDirectory(path="/nonexistent"),
    "chart_folder": ChartFolder(path=charts),
    "compute": ComputeResource(),
}
instance = DagsterInstance.ephemeral()
spec = register_model(model, instance, resources["warehouse"])
if backend == "duckdb":  # on a lake the tables and views are set up once, before the runs
    assert materialize([warehouse_views], instance=instance, resources=resources).success
selection = AssetSelection.assets(encoder_model, corpus_assets_by_name["demo"], fact_assets_by_corpus["demo"])
assert materialize(
    all_assets, selection=selection, partition_key=spec.model_id, instance=instance, resources=resources
).success
print(spec.model_id)
"""


def _copy_model(source: Path, target: Path) -> Path:
    target.mkdir()
    for file in source.iterdir():
        (target / file.name).write_bytes(file.read_bytes())
    return target


def _start_writers(models: list[Path], backend: str, target: str, data_path: str, env: dict) -> list:
    return [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(model), backend, target, data_path, f"{model}.charts"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "OMP_NUM_THREADS": "1", **env},
        )
        for model in models
    ]


PER_MODEL = 24 * 2 * 4  # demo examples x layers x heads of the tiny model


def test_parallel_materializations_share_one_file(tiny_model_dir: Path, tmp_path: Path):
    database = str(tmp_path / "warehouse.duckdb")
    models = [_copy_model(tiny_model_dir, tmp_path / f"model_{index}") for index in range(2)]
    writers = _start_writers(models, "duckdb", database, "", {})
    snapshots = []
    deadline = time.monotonic() + 300
    while any(writer.poll() is None for writer in writers):
        assert time.monotonic() < deadline, "writers did not finish: deadlock?"
        try:
            with duckdb.connect(database, read_only=True) as reader:
                snapshots += reader.execute(
                    "SELECT model_id, count(*) FROM head_summaries GROUP BY model_id"
                ).fetchall()
        except (duckdb.IOException, duckdb.CatalogException):
            pass  # a writer holds the file, or the tables do not exist yet
        time.sleep(0.2)
    outputs = [writer.communicate() for writer in writers]
    assert all(writer.returncode == 0 for writer in writers), [err[-2000:] for _, err in outputs]
    with duckdb.connect(database, read_only=True) as reader:
        counts = dict(reader.execute("SELECT model_id, count(*) FROM head_summaries GROUP BY model_id").fetchall())
        assert reader.execute("SELECT count(*) FROM models").fetchone() == (2,)
    assert sorted(counts.values()) == [PER_MODEL, PER_MODEL]
    # The reader got in between the writers' short transactions and only ever saw whole
    # partitions: one transaction per partition write.
    assert snapshots and all(rows == PER_MODEL for _, rows in snapshots)


def test_four_runs_write_a_ducklake_at_once(
    tiny_model_dir: Path, tmp_path: Path, postgres_url: str, s3_server: S3Server
):
    lake = LakeConfig(postgres_url, f"s3://{s3_server.create_bucket()}/lake/")
    env = {**s3_server.env(), "ATTN_WAREHOUSE_BACKEND": "ducklake"}
    os.environ.update(s3_server.env())  # for this process's own connections (moto accepts any keys)
    with connect_lake(lake) as conn:
        apply_views(conn)  # the setup step: DDL once, before any writer
    models = [_copy_model(tiny_model_dir, tmp_path / f"model_{index}") for index in range(4)]
    started = time.monotonic()
    writers = _start_writers(models, "ducklake", lake.catalog, lake.data_path, env)
    snapshots = []
    with connect_lake(lake, read_only=True) as reader:
        while any(writer.poll() is None for writer in writers):
            assert time.monotonic() - started < 300, "writers did not finish"
            snapshots += reader.execute("SELECT model_id, count(*) FROM stg_head_summaries GROUP BY ALL").fetchall()
            time.sleep(0.2)
    outputs = [writer.communicate() for writer in writers]
    assert all(writer.returncode == 0 for writer in writers), [err[-3000:] for _, err in outputs]
    assert not [err for _, err in outputs if "DuckLake transaction conflict" in err]  # none retried
    with connect_lake(lake, read_only=True) as conn:
        counts = conn.execute("SELECT model_id, count(*) FROM stg_head_summaries GROUP BY ALL").fetchall()
        keys = ["model_id", "corpus", "example_id", "layer", "head"]
        assert sorted(rows for _, rows in counts) == [PER_MODEL] * 4
        # appended once each: the tables hold exactly the staged rows, no key twice
        assert conn.execute(f"SELECT count(*), count(DISTINCT ({', '.join(keys)})) FROM head_summaries").fetchone() == (
            4 * PER_MODEL,
            4 * PER_MODEL,
        )
        assert conn.execute("SELECT count(*) FROM models").fetchone() == (4,)
        assert conn.execute("SELECT count(*) FROM batches WHERE table_name = 'head_summaries'").fetchone() == (4,)
    assert all(rows == PER_MODEL for _, rows in snapshots)  # whole partitions or nothing
