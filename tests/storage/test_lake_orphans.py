"""Maintenance never deletes what a writer may still commit (storage/lake.py ORPHAN_FLOOR):
at its most aggressive setting (keep 0) beside a writer whose Parquet files are written but not
yet committed, the files stay, the writer commits, and every view reads. A committed batch whose
files are gone anyway is named as such, not as disk space (storage/partition_writes.py)."""

from datetime import timedelta
from pathlib import Path

import polars as pl
import pytest

from dagster_project.compute.models import ModelSpec
from dagster_project.storage.connections import WarehouseFullError
from dagster_project.storage.lake import LakeConfig, connect_lake, maintain_files
from dagster_project.storage.model_rows import upsert_model
from dagster_project.storage.partition_writes import replace_partition
from dagster_project.storage.sql_files import view_definitions
from dagster_project.storage.views import apply_views

SPEC = ModelSpec("org--m", "org/m", "/x", "r1", "bert", 1, 2, True)


def summaries(n: int) -> pl.DataFrame:
    return pl.DataFrame(
        {"example_id": range(n), "layer": [1] * n, "head": [1] * n, "n_tokens": [10] * n, "to_cls": [0.5] * n}
    ).with_columns(pl.col("to_cls").cast(pl.Float32))


@pytest.fixture
def lake(tmp_path: Path) -> LakeConfig:
    config = LakeConfig(str(tmp_path / "catalog.sqlite"), str(tmp_path / "data"))
    with connect_lake(config) as conn:
        apply_views(conn)
        upsert_model(conn, SPEC)
    return config


def parquet_files(config: LakeConfig) -> set[Path]:
    return set(Path(config.data_path).rglob("*.parquet"))


def test_maintenance_at_keep_zero_leaves_a_writers_uncommitted_files(lake: LakeConfig) -> None:
    with connect_lake(lake) as maintainer:  # what there is to expire or merge is done before the write
        maintain_files(maintainer, keep=timedelta(0))
    writer = connect_lake(lake)
    before = parquet_files(lake)
    writer.execute("BEGIN TRANSACTION")
    writer.register("incoming", summaries(3).to_arrow())
    writer.execute(
        "INSERT INTO head_summaries BY NAME SELECT *, 'org--m' AS model_id, 'demo' AS corpus, 'b1' AS batch_id "
        "FROM incoming"
    )
    written = parquet_files(lake) - before
    assert written, "the writer's Parquet file is on disk before it commits"
    with connect_lake(lake) as maintainer:
        assert maintain_files(maintainer, keep=timedelta(0))["deleted_orphaned_files"] == 0
    assert written <= parquet_files(lake)
    writer.execute(
        "INSERT INTO batches (table_name, model_id, corpus, batch_id, written_at, n_rows) "
        "VALUES ('head_summaries', 'org--m', 'demo', 'b1', now()::TIMESTAMP, 3)"
    )
    writer.execute("COMMIT")
    writer.close()
    with connect_lake(lake, read_only=True) as reader:
        for view in view_definitions():
            reader.execute(f"SELECT count(*) FROM {view.name}").fetchall()
        assert reader.execute("SELECT count(*) FROM stg_head_summaries").fetchone() == (3,)


def test_a_batch_whose_files_are_gone_is_named_as_such(lake: LakeConfig) -> None:
    with connect_lake(lake) as conn:
        replace_partition(conn, {"head_summaries": summaries(3)}, SPEC.model_id, "demo")
        for path in parquet_files(lake):
            path.unlink()
        with pytest.raises(WarehouseFullError) as raised:
            replace_partition(conn, {"head_summaries": summaries(4)}, SPEC.model_id, "demo")
    message = str(raised.value)
    assert "the DuckLake references a Parquet file that is gone" in message
    assert "this is not disk space" in message and "\n" not in message
