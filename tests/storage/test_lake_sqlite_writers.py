"""Several writer processes on one DuckLake with a SQLite catalog: SQLite takes one committing
transaction at a time, so each writer waits its turn for the catalog's write lock
(lake.write_lock) instead of failing with `database is locked`; and `attn-warehouse sql` beside
them reads again when its read meets a commit (lake.read_retrying)."""

import subprocess
import sys
import time
from pathlib import Path

import pytest

from dagster_project.cli.sql import sql
from dagster_project.compute.models import ModelSpec
from dagster_project.storage.lake import LakeConfig, connect_lake, read_retrying
from dagster_project.storage.model_rows import upsert_model
from dagster_project.storage.views import apply_views

SPEC = ModelSpec("org--m", "org/m", "/x", "r1", "bert", 2, 4, True)
WRITERS = 3
ROUNDS = 10
ROWS = 64  # 8 examples x 2 layers x 4 heads
CURRENT_ROWS = (
    "SELECT corpus, count(*), min(n_tokens), max(n_tokens) FROM stg_head_summaries WHERE model_id = ? "
    "GROUP BY corpus ORDER BY corpus"
)

WRITER = """
import logging, sys
import polars as pl
from dagster_project.storage.lake import LakeConfig, connect_lake
from dagster_project.storage.partition_writes import replace_partition

logging.basicConfig(level=logging.WARNING, format="%(message)s")
catalog, data_path, corpus, rounds, rows = sys.argv[1:6]
conn = connect_lake(LakeConfig(catalog, data_path))
print("ready", flush=True)
sys.stdin.readline()  # every writer starts at once
for round_ in range(int(rounds)):
    index = pl.int_range(0, int(rows), eager=True)
    frame = pl.DataFrame({
        "example_id": index // 8, "layer": index // 4 % 2, "head": index % 4,
        "n_tokens": pl.repeat(round_ + 1, int(rows), eager=True), "to_cls": index.cast(pl.Float32),
    })
    replace_partition(conn, {"head_summaries": frame}, "org--m", corpus)
print("done", flush=True)
"""


@pytest.fixture
def lake(tmp_path: Path) -> LakeConfig:
    config = LakeConfig(str(tmp_path / "catalog.sqlite"), str(tmp_path / "data"))
    conn = connect_lake(config)
    apply_views(conn)
    upsert_model(conn, SPEC)
    return config


def _start_writers(config: LakeConfig, corpora: list[str]) -> list[subprocess.Popen]:
    """One writer process per corpus, each writing ROUNDS batches of its partition; started together."""
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, config.catalog, config.data_path, corpus, str(ROUNDS), str(ROWS)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for corpus in corpora
    ]
    for writer in writers:
        assert writer.stdout.readline().strip() == "ready"
    for writer in writers:
        writer.stdin.write("go\n")
        writer.stdin.flush()
    return writers


def _finished(writers: list[subprocess.Popen]) -> list[str]:
    """Each writer's stderr, once it ended having written every round."""
    errors = []
    for writer in writers:
        out, err = writer.communicate(timeout=600)
        assert (writer.returncode, out.split()) == (0, ["done"]), err
        errors.append(err)
    return errors


def _assert_last_rounds(config: LakeConfig, corpora: list[str]) -> None:
    """Each partition shows its last round once, and every write committed its batch."""
    conn = connect_lake(config, read_only=True)
    assert read_retrying(conn, CURRENT_ROWS, [SPEC.model_id]) == [(corpus, ROWS, ROUNDS, ROUNDS) for corpus in corpora]
    batches = "SELECT count(*) FROM batches WHERE table_name = 'head_summaries' AND model_id = ?"
    assert read_retrying(conn, batches, [SPEC.model_id]) == [
        (len(corpora) * ROUNDS,)
    ]  # replaced ones stay until expired


def test_writers_on_a_sqlite_catalog_wait_their_turn(lake: LakeConfig) -> None:
    corpora = [f"c{i}" for i in range(WRITERS)]
    for err in _finished(_start_writers(lake, corpora)):
        assert "database is locked" not in err, err  # no writer met another's commit: each waited its turn
    _assert_last_rounds(lake, corpora)


def test_sql_beside_writers_reads_again_when_it_meets_a_commit(
    lake: LakeConfig, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.setenv("ATTN_WAREHOUSE_BACKEND", "ducklake")
    monkeypatch.setenv("ATTN_LAKE_CATALOG", lake.catalog)
    monkeypatch.setenv("ATTN_LAKE_DATA_PATH", lake.data_path)
    corpora = [f"c{i}" for i in range(WRITERS)]
    writers = _start_writers(lake, corpora)
    reads = []
    while any(writer.poll() is None for writer in writers):
        reads.append(sql("SELECT corpus, count(*) AS n FROM stg_head_summaries GROUP BY corpus", 50))
        err = capsys.readouterr().err
        assert reads[-1] == 0, err
        time.sleep(0.01)
    _finished(writers)  # the writers may retry a commit that met a read; each wrote every round
    assert len(reads) >= 3
    _assert_last_rounds(lake, corpora)
