"""A DuckLake write whose data path fails mid-way (a full disk: tests/conftest.py's tiny tmpfs; a
folder that cannot be created) rolls back: one message saying what, where and what to do, the
catalog's password masked, the partition's rows and the `batches` table unchanged, and the file the
write left behind deleted by maintenance."""

from datetime import timedelta
from pathlib import Path

import duckdb
import numpy as np
import polars as pl
import pytest

from dagster_project.compute.models import ModelSpec
from dagster_project.storage.connections import WarehouseFullError
from dagster_project.storage.lake import LakeConfig, connect_lake, maintain_files
from dagster_project.storage.model_rows import upsert_model
from dagster_project.storage.partition_writes import replace_partition
from dagster_project.storage.views import apply_views
from tests.servers import POSTGRES_PASSWORD, PostgresServer

SPEC = ModelSpec("org--m", "org/m", "/x", "r1", "bert", 2, 4, True)


def _summaries(n: int, seed: int) -> pl.DataFrame:
    """n head-summary rows of random [CLS] mass: random floats do not compress, so n sets the file size."""
    index = np.arange(n)
    return pl.DataFrame(
        {
            "example_id": index // 8,
            "layer": index // 4 % 2,
            "head": index % 4,
            "n_tokens": 10,
            "to_cls": np.random.default_rng(seed).random(n, dtype=np.float32),
        }
    )


def _state(conn: duckdb.DuckDBPyConnection) -> tuple[list, list, list]:
    """Every batch, the table's stored rows (every batch) and the current rows, in order."""
    return (
        conn.execute("SELECT * FROM batches ORDER BY ALL").fetchall(),
        conn.execute("SELECT batch_id, count(*) FROM head_summaries GROUP BY ALL ORDER BY ALL").fetchall(),
        conn.execute("SELECT example_id, layer, head, to_cls FROM stg_head_summaries ORDER BY ALL").fetchall(),
    )


def _parquet(data: Path, corpus: str) -> set[str]:
    return {
        file.name
        for file in (data / "main" / "head_summaries" / f"model_id={SPEC.model_id}").glob(f"corpus={corpus}/*")
    }


@pytest.fixture(params=["sqlite", "postgres"])
def catalog(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "catalog.sqlite")
    server: PostgresServer = request.getfixturevalue("postgres_server")
    return server.url(server.create_database())


def test_a_full_data_path_rolls_the_write_back_and_says_what_to_do(catalog: str, tiny_disk: Path):
    data = tiny_disk / "lake"
    with connect_lake(LakeConfig(catalog, str(data))) as conn:
        apply_views(conn)
        upsert_model(conn, SPEC)
        replace_partition(conn, {"head_summaries": _summaries(800, 0)}, SPEC.model_id, "demo")
        before, files_before = _state(conn), _parquet(data, "demo")

        with pytest.raises(WarehouseFullError) as raised:  # ~2 MB of Parquet for a 1 MB disk
            replace_partition(conn, {"head_summaries": _summaries(500_000, 1)}, SPEC.model_id, "demo")
        message = str(raised.value)
        assert message.startswith(f"could not write partition (org--m, demo) to the DuckLake data path {data}/: ")
        assert "the disk is full (" in message and "No space left on device" in message
        assert "Nothing was committed: the partition keeps its current batch and `batches` is unchanged" in message
        assert "point ATTN_LAKE_DATA_PATH at a larger store" in message and "free there now" in message
        assert POSTGRES_PASSWORD not in message and "\n" not in message
        assert isinstance(raised.value.__cause__, duckdb.IOException)
        assert _state(conn) == before
        # the half-written file is left behind, referenced by nothing: maintenance deletes it
        assert len(_parquet(data, "demo") - files_before) == 1
        assert maintain_files(conn, keep=timedelta(0), orphan_floor=timedelta(0))["deleted_orphaned_files"] == 1
        assert _parquet(data, "demo") == files_before

        # with the room back, the same connection writes the partition
        replace_partition(conn, {"head_summaries": _summaries(16, 2)}, SPEC.model_id, "demo")
        assert conn.execute("SELECT count(*) FROM stg_head_summaries").fetchone() == (16,)


def test_a_data_folder_that_cannot_be_created_rolls_the_write_back(tmp_path: Path):
    data = tmp_path / "data"
    with connect_lake(LakeConfig(str(tmp_path / "catalog.sqlite"), str(data))) as conn:
        apply_views(conn)
        upsert_model(conn, SPEC)
        replace_partition(conn, {"head_summaries": _summaries(64, 0)}, SPEC.model_id, "demo")
        before = _state(conn)
        # a file where the new partition's folder goes: the write's Parquet file cannot be created
        blocked = data / "main" / "head_summaries" / f"model_id={SPEC.model_id}" / "corpus=blocked"
        blocked.write_text("")
        with pytest.raises(WarehouseFullError) as raised:
            replace_partition(conn, {"head_summaries": _summaries(64, 1)}, SPEC.model_id, "blocked")
        message = str(raised.value)
        assert message.startswith(f"could not write partition (org--m, blocked) to the DuckLake data path {data}/: ")
        assert "the data path refused the write (" in message and "fix its permissions" in message
        assert _state(conn) == before
        blocked.unlink()
        replace_partition(conn, {"head_summaries": _summaries(64, 1)}, SPEC.model_id, "blocked")
        (n,) = conn.execute("SELECT count(*) FROM stg_head_summaries WHERE corpus = 'blocked'").fetchone()
        assert n == 64
