"""Two model partitions materialized at once by separate processes against one DuckDB file,
with a read-only reader polling it: no lost rows, no partial partitions, no deadlock."""

import os
import subprocess
import sys
import time
from pathlib import Path

import duckdb

WRITER = """
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
from dagster_project.defs.resources import ChartFolder, ComputeResource, DataDirectory

model, database = sys.argv[1], sys.argv[2]
resources = {
    "warehouse": DuckDBResource(database=database),
    "data_dir": DataDirectory(path="/nonexistent"),
    "chart_folder": ChartFolder(path=database + ".charts"),
    "compute": ComputeResource(),
}
instance = DagsterInstance.ephemeral()
spec = register_model(model, instance, resources["warehouse"])
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


def test_parallel_materializations_share_one_file(tiny_model_dir: Path, tmp_path: Path):
    database = str(tmp_path / "warehouse.duckdb")
    models = [_copy_model(tiny_model_dir, tmp_path / f"model_{index}") for index in range(2)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(model), database],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for model in models
    ]
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
    per_model = 24 * 2 * 4  # demo examples x layers x heads of the tiny model
    assert sorted(counts.values()) == [per_model, per_model]
    # The reader got in between the writers' short transactions and only ever saw whole
    # partitions: one transaction per partition write.
    assert snapshots and all(rows == per_model for _, rows in snapshots)
