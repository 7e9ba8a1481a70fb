"""Writers beside the lake's other writing steps: four writer threads rewrite partitions while
maintenance (the `warehouse_maintenance` asset's storage functions) runs, or while the views
are re-created (`apply_views`, the `warehouse_views` asset), and a reader polls every
partition. Afterwards every partition holds its last write exactly once, the reader never saw
a partition partial, mixed or missing, and maintenance removed the replaced batches' files."""

import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import duckdb
import polars as pl
import pytest

from dagster_project.compute.models import ModelSpec
from dagster_project.storage.batches import expire_replaced_batches
from dagster_project.storage.lake import ORPHAN_FLOOR, LakeConfig, connect_lake, maintain_files, read_retrying
from dagster_project.storage.model_rows import upsert_model
from dagster_project.storage.partition_writes import replace_partition
from dagster_project.storage.views import apply_views
from tests.servers import S3Server

SPEC = ModelSpec("org--m", "org/m", "/x", "r1", "bert", 2, 4, True)
WRITERS = 4
CORPORA = [f"c{i}" for i in range(2 * WRITERS)]  # each writer owns two partitions
ROUNDS = 4
ROWS = 64  # 8 examples x 2 layers x 4 heads
# Over every row of a partition's current batch: its row count and an order-free content hash.
PARTITION_HASHES = (
    "SELECT corpus, count(*), count(DISTINCT n_tokens), bit_xor(hash(example_id, layer, head, n_tokens, to_cls)) "
    "FROM stg_head_summaries WHERE model_id = ? GROUP BY corpus"
)


def _summaries(corpus: str, round_: int) -> pl.DataFrame:
    """The partition's rows of one round: n_tokens carries the round, to_cls the corpus and the round."""
    index = pl.int_range(0, ROWS, eager=True)
    return pl.DataFrame(
        {
            "example_id": index // 8,
            "layer": index // 4 % 2,
            "head": index % 4,
            "n_tokens": pl.repeat(round_ + 1, ROWS, eager=True),
            "to_cls": (index + 1000 * round_ + 100_000 * CORPORA.index(corpus)).cast(pl.Float32),
        }
    )


def _content_hash(frame: pl.DataFrame) -> int:
    """The hash PARTITION_HASHES computes, of a frame (DuckDB's own hash, in a scratch connection)."""
    with duckdb.connect() as scratch:
        scratch.register("rows", frame.to_arrow())
        return scratch.execute("SELECT bit_xor(hash(example_id, layer, head, n_tokens, to_cls)) FROM rows").fetchone()[
            0
        ]


EXPECTED = {(corpus, r): _content_hash(_summaries(corpus, r)) for corpus in CORPORA for r in range(ROUNDS + 1)}


class Workload:
    """Writers, a reader and a third party, each in its own thread on its own cursor; every
    exception and every partition the reader saw wrong is collected."""

    def __init__(self, connect: Callable[[], duckdb.DuckDBPyConnection]):
        self.connect = connect
        self.errors: list[str] = []
        self.bad_reads: list[str] = []
        self.reads = 0
        self.writing = threading.Event()

    def writer(self, index: int) -> None:
        try:
            with self.connect() as conn:
                for round_ in range(1, ROUNDS + 1):
                    for corpus in CORPORA[2 * index : 2 * index + 2]:
                        replace_partition(conn, {"head_summaries": _summaries(corpus, round_)}, SPEC.model_id, corpus)
        except Exception as error:
            self.errors.append(f"writer {index}: {error!r}")

    def reader(self) -> None:
        with self.connect() as conn:
            while self.writing.is_set():
                try:  # a read that meets a writer committing to a SQLite catalog is run again
                    seen = read_retrying(conn, PARTITION_HASHES, [SPEC.model_id])
                except duckdb.Error as error:
                    self.errors.append(f"reader: {error!r}")
                    continue
                self.reads += 1
                found = {corpus: (n, rounds, digest) for corpus, n, rounds, digest in seen}
                for corpus in CORPORA:
                    n, rounds, digest = found.get(corpus, (0, 0, None))
                    if n != ROWS or rounds != 1 or digest not in {EXPECTED[corpus, r] for r in range(ROUNDS + 1)}:
                        self.bad_reads.append(f"{corpus}: {n} rows of {rounds} rounds")

    def run(self, beside: Callable[[], None]) -> None:
        """Round 0 of every partition, then the writers, the reader and `beside` at once."""
        with self.connect() as conn:
            apply_views(conn)
            upsert_model(conn, SPEC)
            for corpus in CORPORA:
                replace_partition(conn, {"head_summaries": _summaries(corpus, 0)}, SPEC.model_id, corpus)
        self.writing.set()
        reader = threading.Thread(target=self.reader)
        writers = [threading.Thread(target=self.writer, args=(i,)) for i in range(WRITERS)]
        for thread in [reader, *writers]:
            thread.start()
        try:
            beside()
        except Exception as error:
            self.errors.append(f"beside the writers: {error!r}")
        for thread in writers:
            thread.join()
        self.writing.clear()
        reader.join()

    def assert_every_partition_is_its_last_write_once(self) -> None:
        assert not self.errors
        assert self.reads > 0 and not self.bad_reads
        with self.connect() as conn:
            final = {
                corpus: (n, digest)
                for corpus, n, _, digest in conn.execute(PARTITION_HASHES, [SPEC.model_id]).fetchall()
            }
            batches = conn.execute(
                "SELECT corpus, count(*) FROM stg_batches WHERE table_name = 'head_summaries' GROUP BY corpus"
            ).fetchall()
        assert final == {corpus: (ROWS, EXPECTED[corpus, ROUNDS]) for corpus in CORPORA}
        assert dict(batches) == dict.fromkeys(CORPORA, 1)


@pytest.fixture
def s3_lake(
    postgres_url: str, s3_server: S3Server, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[LakeConfig, str]]:
    """A lake with its catalog in a new PostgreSQL database and its data in a new bucket."""
    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)
    bucket = s3_server.create_bucket()
    yield LakeConfig(postgres_url, f"s3://{bucket}/lake/"), bucket


def _maintain(conn: duckdb.DuckDBPyConnection, keep: timedelta, orphan_floor: timedelta = ORPHAN_FLOOR) -> None:
    """What the `warehouse_maintenance` asset runs (orphans younger than `orphan_floor` kept, as there)."""
    expire_replaced_batches(conn)
    maintain_files(conn, keep, orphan_floor)


def test_maintenance_twice_beside_four_writers_and_a_reader(s3_lake, s3_server: S3Server, caplog):
    config, bucket = s3_lake
    workload = Workload(lambda: connect_lake(config))
    # Snapshots and unreferenced files younger than this are kept: longer than any read or write
    # here takes, so maintenance never deletes a file a running transaction still reads or will commit.
    keep = timedelta(seconds=2)

    def files() -> int:
        return len(s3_server.keys(bucket, "lake/main/head_summaries/"))

    counted: list[int] = []

    def maintain_twice() -> None:
        with connect_lake(config) as conn:
            for _ in range(2):
                time.sleep(1.0)
                counted.append(files())
                _maintain(conn, keep)

    workload.run(maintain_twice)
    workload.assert_every_partition_is_its_last_write_once()
    # one Parquet file per batch, and one more per commit that lost a conflict and was tried again
    retried = sum("transaction conflict, retrying" in record.getMessage() for record in caplog.records)
    written = len(CORPORA) * (ROUNDS + 1) + retried
    assert counted and max(counted) <= written
    with connect_lake(config) as conn:
        # Every partition written once more, so files to remove exist however late the second pass
        # above ran (on a slow machine it can run after the writers and leave one file each).
        for corpus in CORPORA:
            replace_partition(conn, {"head_summaries": _summaries(corpus, ROUNDS)}, SPEC.model_id, corpus)
        before = files()
        # no writer left: the files this pass merges expire in it too, and so do the files of the
        # transactions that lost a conflict and retried (orphans the floor keeps while writers run)
        _maintain(conn, timedelta(0), orphan_floor=timedelta(0))
    # the replaced batches' files are gone: one current file per partition stays
    assert before >= 2 * len(CORPORA) and files() == len(CORPORA)
    workload.assert_every_partition_is_its_last_write_once()


@pytest.fixture(params=["duckdb", "ducklake"])
def connect(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], duckdb.DuckDBPyConnection]:
    """Cursors of one DuckDB file's connection, or of a lake with a PostgreSQL catalog (the
    catalog for many writers; a SQLite catalog's file takes one committing writer at a time)."""
    if request.param == "ducklake":
        server = request.getfixturevalue("postgres_server")
        config = LakeConfig(server.url(server.create_database()), str(tmp_path / "data"))
        return lambda: connect_lake(config)
    database = duckdb.connect(str(tmp_path / "warehouse.duckdb"))
    request.addfinalizer(database.close)
    return database.cursor


def test_views_recreated_beside_writers_and_a_reader(connect: Callable[[], duckdb.DuckDBPyConnection]):
    workload = Workload(connect)
    applied = 0

    def recreate_views() -> None:
        nonlocal applied
        with connect() as conn:
            while workload.writing.is_set() and applied < 20:
                apply_views(conn)
                applied += 1

    workload.run(recreate_views)
    workload.assert_every_partition_is_its_last_write_once()
    assert applied >= 2
