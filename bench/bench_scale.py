"""Scale-out: a DuckLake (PostgreSQL catalog, local moto S3) written by 4 runs at once against
the DuckDB file written by the same 4 runs one after another, in one process's measurements.

  materializations  4 runs, each a separate process materializing encoder_model, demo_examples
                    and demo_attention_facts of its own model (a tiny random BERT, so writing and
                    orchestration are measured, not the forward pass): at once into DuckLake,
                    one after another into the DuckDB file. Counts aborted runs, retried
                    DuckLake transactions, and lost or duplicated rows (every key once).
  write             one partition's write (the rows of one run's tables, read back), connection
                    included as the assets do it: DuckLake vs the DuckDB file, median of --repeats,
                    at the run's size and --scale times larger (examples repeated).
  views             every sql/results view, SELECT * fetched, median of --repeats, on the lake vs
                    the file holding the same 4 partitions.

PostgreSQL comes from the machine's binaries and S3 from moto's server in its own process, as
in the tests (tests/servers.py). Usage:
  OMP_WAIT_POLICY=PASSIVE .venv/bin/python -m bench.bench_scale [--repeats 5] [--scale 50]
Targets: 0 aborted writes, 0 lost or duplicated rows, concurrent wall <= 0.6x serial;
per-partition write <= 1.5x; median results-view query <= 2x.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.servers, tests.tiny_models

import duckdb
import polars as pl
from transformers import BertModel

from dagster_project.settings import SQL_DIR
from dagster_project.storage.batches import expire_replaced_batches, partition_rows
from dagster_project.storage.connections import connect_for_writing
from dagster_project.storage.lake import LakeConfig, connect_lake, maintain_files
from dagster_project.storage.partition_writes import replace_partition
from dagster_project.storage.schema import PARTITIONED_TABLES
from dagster_project.storage.views import apply_views
from tests.servers import start_postgres, start_s3_process
from tests.tiny_models import bert_tokenizer, save_model, tiny_config

N_RUNS = 4
RUN = """
import sys
from dagster import AssetSelection, DagsterInstance, materialize
from dagster_project.defs.assets import all_assets, corpus_assets_by_name, encoder_model, fact_assets_by_corpus
from dagster_project.defs.registration import register_model
from dagster_project.defs.resources import ChartFolder, ComputeResource, DataDirectory, WarehouseResource

model, backend, target, data_path = sys.argv[1:5]
lake = {"lake_catalog": target, "lake_data_path": data_path} if backend == "ducklake" else {}
warehouse = WarehouseResource(database=target, backend=backend, **lake)
resources = {"warehouse": warehouse, "data_dir": DataDirectory(path="/nonexistent"),
             "chart_folder": ChartFolder(path=model + ".charts"), "compute": ComputeResource()}
instance = DagsterInstance.ephemeral()
spec = register_model(model, instance, warehouse)
selection = AssetSelection.assets(encoder_model, corpus_assets_by_name["demo"], fact_assets_by_corpus["demo"])
sys.exit(0 if materialize(all_assets, selection=selection, partition_key=spec.model_id, instance=instance,
                          resources=resources, raise_on_error=False).success else 1)
"""


def run_materializations(models: list[Path], backend: str, target: str, data_path: str, at_once: bool, env: dict):
    """Wall seconds, failed runs and retried DuckLake transactions of one run per model."""
    command = [sys.executable, "-c", RUN]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "ATTN_WAREHOUSE_BACKEND": backend, **env}
    started = time.perf_counter()
    results = []
    if at_once:
        processes = [
            subprocess.Popen([*command, str(m), backend, target, data_path], env=env, stderr=subprocess.PIPE, text=True)
            for m in models
        ]
        results = [(p.wait(), p.stderr.read()) for p in processes]
    else:
        for model in models:
            done = subprocess.run(
                [*command, str(model), backend, target, data_path], env=env, capture_output=True, text=True
            )
            results.append((done.returncode, done.stderr))
    wall = time.perf_counter() - started
    failed = [err[-2000:] for code, err in results if code != 0]
    retries = sum(err.count("DuckLake transaction conflict") for _, err in results)
    return wall, failed, retries


def lost_or_duplicated(conn: duckdb.DuckDBPyConnection, expected_per_model: int) -> tuple[int, int]:
    """(lost, duplicated) head_summaries rows over the runs' partitions."""
    staged, distinct, rows = conn.execute(
        "SELECT (SELECT count(*) FROM stg_head_summaries), "
        "count(DISTINCT (model_id, corpus, example_id, layer, head)), count(*) FROM head_summaries"
    ).fetchone()
    return max(N_RUNS * expected_per_model - staged, 0), rows - distinct


def median_seconds(action: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def scaled(frames: dict[str, pl.DataFrame], factor: int) -> dict[str, pl.DataFrame]:
    """The partition's rows `factor` times, as examples with new ids."""
    out = {}
    for table, frame in frames.items():
        if "example_id" not in frame.columns or frame.is_empty():
            out[table] = frame
            continue
        span = int(frame["example_id"].max()) + 1
        out[table] = pl.concat(
            [frame.with_columns(pl.col("example_id") + copy * span) for copy in range(factor)], how="vertical"
        )
    return out


def rows(frames: dict[str, pl.DataFrame]) -> int:
    return sum(frame.height for frame in frames.values())


def partition_frames(conn: duckdb.DuckDBPyConnection, model_id: str) -> dict[str, pl.DataFrame]:
    """A model's demo partition as it was written: its non-empty tables."""
    frames = {
        table: partition_rows(conn, table, model_id, "demo").drop("model_id", "corpus")
        for table in sorted(PARTITIONED_TABLES)
    }
    return {table: frame for table, frame in frames.items() if not frame.is_empty()}


def view_times(file_conn, lake_conn, repeats: int) -> dict[str, tuple[float, float]]:
    """Median seconds of SELECT * of every sql/results view: (DuckLake, DuckDB file)."""
    times = {}
    for conn in (file_conn, lake_conn):
        conn.execute("SET enable_progress_bar = false")
    for view in sorted(path.stem for path in (SQL_DIR / "results").glob("*.sql")):
        query = f"SELECT * FROM {view}"
        lake_time = median_seconds(lambda q=query: lake_conn.execute(q).fetchall(), repeats)
        file_time = median_seconds(lambda q=query: file_conn.execute(q).fetchall(), repeats)
        times[view] = (lake_time, file_time)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--scale", type=int, default=50)
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="bench-scale-"))
    tokenizer = bert_tokenizer()
    template = save_model(work / "tiny", BertModel(tiny_config(tokenizer.vocab_size)), tokenizer)
    models = []
    for index in range(N_RUNS):  # different model partitions: same weights, their own folders
        folder = work / f"model_{index}"
        folder.mkdir()
        for file in template.iterdir():
            (folder / file.name).write_bytes(file.read_bytes())
        models.append(folder)

    postgres, s3 = start_postgres(), start_s3_process()
    try:
        os.environ.update(s3.env())
        lake = LakeConfig(postgres.url(postgres.create_database()), f"s3://{s3.create_bucket()}/lake/")
        database = str(work / "warehouse.duckdb")
        with connect_lake(lake) as conn:
            apply_views(conn)  # the setup step, once
        with duckdb.connect(database) as conn:
            apply_views(conn)

        serial, serial_failed, _ = run_materializations(models, "duckdb", database, "", False, {})
        concurrent, lake_failed, retries = run_materializations(
            models, "ducklake", lake.catalog, lake.data_path, True, s3.env()
        )
        per_model = 24 * 2 * 4  # demo pairs x layers x heads of the tiny model
        with duckdb.connect(database) as file_conn, connect_lake(lake) as lake_conn:
            file_lost, file_dup = lost_or_duplicated(file_conn, per_model)
            lake_lost, lake_dup = lost_or_duplicated(lake_conn, per_model)
            run_frames = {
                model_id: partition_frames(file_conn, model_id)
                for (model_id,) in file_conn.execute("SELECT model_id FROM models ORDER BY ALL").fetchall()
            }
            views_run_size = view_times(file_conn, lake_conn, args.repeats)

        # Writes into their own targets, so the runs' warehouses keep only the runs' partitions.
        write_lake_config = LakeConfig(postgres.url(postgres.create_database()), f"s3://{s3.create_bucket()}/w/")
        write_database = str(work / "writes.duckdb")
        with connect_lake(write_lake_config) as conn, duckdb.connect(write_database) as file_conn:
            apply_views(conn)
            apply_views(file_conn)

        def write_file(frames: dict[str, pl.DataFrame]) -> None:
            with connect_for_writing(write_database) as conn:
                replace_partition(conn, frames, "bench--write", "demo")

        def write_lake(frames: dict[str, pl.DataFrame]) -> None:
            with connect_lake(write_lake_config) as conn:
                replace_partition(conn, frames, "bench--write", "demo")

        frames = next(iter(run_frames.values()))
        writes = {
            label: (
                median_seconds(lambda f=f: write_lake(f), args.repeats),
                median_seconds(lambda f=f: write_file(f), args.repeats),
            )
            for label, f in (
                (f"run size ({rows(frames):,} rows)", frames),
                (f"x{args.scale} ({rows(scaled(frames, args.scale)):,} rows)", scaled(frames, args.scale)),
            )
        }
        lake_connect = median_seconds(lambda: connect_lake(lake).close(), args.repeats)
        file_connect = median_seconds(lambda: connect_for_writing(database).close(), args.repeats)

        # The same 4 partitions args.scale times larger, the lake maintained (replaced batches
        # and their files removed), as after a night's maintenance.
        with duckdb.connect(database) as file_conn, connect_lake(lake) as lake_conn:
            for model_id, frames in run_frames.items():
                replace_partition(file_conn, scaled(frames, args.scale), model_id, "demo")
                replace_partition(lake_conn, scaled(frames, args.scale), model_id, "demo")
            expire_replaced_batches(lake_conn)
            maintain_files(lake_conn, keep=timedelta(0))
            views_scaled = view_times(file_conn, lake_conn, args.repeats)
    finally:
        postgres.stop()
        s3.stop()

    print(f"{N_RUNS} materializations (tiny BERT, demo corpus, one process each):")
    print(f"  serial into the DuckDB file: {serial:.1f} s; at once into DuckLake (PostgreSQL + S3): {concurrent:.1f} s")
    print(f"  concurrent / serial wall: {concurrent / serial:.2f}x (target <= 0.6x)")
    print(
        f"  aborted runs: DuckLake {len(lake_failed)}, file {len(serial_failed)}; "
        f"retried DuckLake transactions: {retries}"
    )
    print(f"  lost / duplicated head_summaries rows: DuckLake {lake_lost} / {lake_dup}, file {file_lost} / {file_dup}")
    for failure in lake_failed + serial_failed:
        print("  FAILED RUN:", failure)
    print("per-partition write, connection included (DuckLake / DuckDB file, median of", args.repeats, "):")
    for label, (lake_time, file_time) in writes.items():
        print(
            f"  {label}: {lake_time * 1000:.0f} ms / {file_time * 1000:.0f} ms = "
            f"{lake_time / file_time:.2f}x (target <= 1.5x)"
        )
    print(f"  of which connecting: {lake_connect * 1000:.0f} ms / {file_connect * 1000:.0f} ms")
    for label, times in (
        (f"run size ({rows(frames):,} rows a partition)", views_run_size),
        (f"x{args.scale}, lake maintained", views_scaled),
    ):
        ratios = [lake_time / file_time for lake_time, file_time in times.values()]
        print(
            f"results views at {label}, SELECT * (DuckLake / DuckDB file, median of {args.repeats}), "
            f"{len(ratios)} views:"
        )
        for view, (lake_time, file_time) in sorted(times.items(), key=lambda item: -item[1][0] / item[1][1]):
            print(
                f"  {view:40s} {lake_time * 1000:8.1f} ms / {file_time * 1000:7.1f} ms = {lake_time / file_time:5.2f}x"
            )
        print(f"  median ratio: {statistics.median(ratios):.2f}x (target <= 2x); max {max(ratios):.2f}x")


if __name__ == "__main__":
    main()
