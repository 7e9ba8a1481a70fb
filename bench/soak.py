"""Soak: rounds in which writer threads rewrite partitions while maintenance runs at its most
aggressive setting and a reader polls every partition, against the DuckLake (a PostgreSQL catalog
and S3 data, from the tests' server starters) and against the DuckDB file. Every read checks each
partition is one whole write (row count and content hash: none partial, none duplicated); after
every round each partition holds its last write once (content hash), the `batches` table matches
the rows, and the data path's file count stays bounded (within twice the first round's) once
maintenance runs with no writer left; at the end every view reads. Bounded by --rounds and --seconds. Usage:

  OMP_WAIT_POLICY=PASSIVE .venv/bin/python -m bench.soak [--rounds 50] [--seconds 300] [--backend both]

Prints per round what it checked, then one line per backend:
`<backend>: rounds R, writes W, bytes B, reads N, maintenance passes M, 0 lost, 0 duplicated, 0 partial,
max files F, S s`; exits 1 on any loss, duplicate, partial read, error or unbounded file count.
"""

import argparse
import os
import sys
import tempfile
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.servers

import duckdb  # noqa: E402
import numpy as np  # noqa: E402
import polars as pl  # noqa: E402

from dagster_project.compute.models import ModelSpec  # noqa: E402
from dagster_project.storage.lake import (  # noqa: E402
    ORPHAN_FLOOR,
    LakeConfig,
    connect_lake,
    maintain_files,
    read_retrying,
)
from dagster_project.storage.warehouse import (  # noqa: E402
    apply_views,
    expire_replaced_batches,
    replace_partition,
    upsert_model,
)
from tests.servers import start_postgres, start_s3_process  # noqa: E402

SPEC = ModelSpec("soak--m", "soak/m", "/x", "r1", "bert", 2, 4, True)
# Between one maintenance pass (or read) and the next while writers run: back to back, the loops
# would take the interpreter from the writers (one DuckDB file: 12,000 checkpoints a round, 27 s).
MAINTENANCE_PAUSE = 0.1
READ_PAUSE = 0.05  # reads at up to 20 Hz, as a dashboard beside a run
CONTENT = "bit_xor(hash(example_id, layer, head, n_tokens, to_cls))"
# Per partition: current rows, their content hash, and how many current batches say they are current.
CURRENT = (
    f"SELECT corpus, count(*), {CONTENT} FROM stg_head_summaries WHERE model_id = ? GROUP BY corpus ORDER BY corpus"
)
# Per partition: the current batch's recorded row count against the rows stored under that batch id.
BATCHES_AGAINST_ROWS = """
SELECT b.corpus, count(*) OVER (PARTITION BY b.corpus) AS current_batches, b.n_rows,
       (SELECT count(*) FROM head_summaries AS h WHERE h.batch_id = b.batch_id) AS stored
FROM stg_batches AS b WHERE b.table_name = 'head_summaries' AND b.model_id = ?
"""


@dataclass
class Tally:
    rounds: int = 0
    writes: int = 0
    bytes: int = 0
    reads: int = 0
    maintenance: int = 0
    lost: int = 0
    duplicated: int = 0
    partial: int = 0
    max_files: int = 0
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def problem(self, text: str) -> None:
        with self.lock:
            self.problems.append(text)

    def summary(self, backend: str) -> str:
        return (
            f"{backend}: rounds {self.rounds}, writes {self.writes}, bytes {self.bytes}, reads {self.reads}, "
            f"maintenance passes {self.maintenance}, {self.lost} lost, {self.duplicated} duplicated, "
            f"{self.partial} partial, max files {self.max_files}, {self.seconds:.0f} s"
        )


def frame(rows: int, seed: int) -> pl.DataFrame:
    """Head-summary rows whose every value depends on `seed`, so each write's content hash differs."""
    index = np.arange(rows)
    return pl.DataFrame(
        {
            "example_id": index // 8,
            "layer": index // 4 % 2,
            "head": index % 4,
            "n_tokens": np.full(rows, seed % 1000 + 1),
            "to_cls": np.random.default_rng(seed).random(rows, dtype=np.float32),
        }
    )


def content_hash(rows: pl.DataFrame) -> int:
    with duckdb.connect() as scratch:
        scratch.register("rows", rows.to_arrow())
        return scratch.execute(f"SELECT {CONTENT} FROM rows").fetchone()[0]


def write_of(corpus: str, version: int, rows: int) -> pl.DataFrame:
    return frame(rows, zlib.crc32(f"{corpus}/{version}".encode()))


@dataclass
class Target:
    """One backend: how to connect, what maintenance is (beside writers, and with none left), and
    how many files its data takes."""

    name: str
    connect: Callable[[], duckdb.DuckDBPyConnection]
    maintain: Callable[[duckdb.DuckDBPyConnection], None]
    maintain_quiet: Callable[[duckdb.DuckDBPyConnection], None]
    count_files: Callable[[], int]


def check(conn: duckdb.DuckDBPyConnection, expected: dict[str, int], rows: int, tally: Tally) -> None:
    """Every partition's current rows are its last write, once; its one current batch records them."""
    found = {corpus: (n, digest) for corpus, n, digest in read_retrying(conn, CURRENT, [SPEC.model_id])}
    for corpus, digest in expected.items():
        n, seen = found.get(corpus, (0, None))
        if n > rows:
            tally.duplicated += 1
            tally.problem(f"{corpus}: {n} current rows, {rows} written")
        elif n < rows or seen != digest:
            tally.lost += 1
            tally.problem(f"{corpus}: {n} current rows, hash {'as written' if seen == digest else 'differs'}")
    for corpus, current_batches, n_rows, stored in read_retrying(conn, BATCHES_AGAINST_ROWS, [SPEC.model_id]):
        if current_batches != 1 or n_rows != stored or n_rows != rows:
            tally.duplicated += current_batches > 1
            tally.problem(f"{corpus}: {current_batches} current batches, {n_rows} recorded, {stored} stored")


class Round:
    """One round's threads: writers (each owning some partitions), maintenance in a loop and a reader
    in a loop, the last two until every writer has finished. Each read must see every partition as
    one whole write of this round or its last write before it."""

    def __init__(self, target: Target, writes: list[tuple[str, int]], writers: int, rows: int, tally: Tally):
        self.target, self.rows, self.tally = target, rows, tally
        corpora = sorted({corpus for corpus, _ in writes})
        self.owned = [[write for write in writes if corpora.index(write[0]) % writers == i] for i in range(writers)]
        self.frames = {write: write_of(*write, rows) for write in writes}
        self.writing = threading.Event()

    def writer(self, writes: list[tuple[str, int]]) -> None:
        try:
            with self.target.connect() as conn:
                for corpus, version in writes:
                    replace_partition(conn, {"head_summaries": self.frames[corpus, version]}, SPEC.model_id, corpus)
        except Exception as error:
            self.tally.problem(f"writer: {error!r}")

    def maintainer(self) -> None:
        with self.target.connect() as conn:
            while True:
                try:
                    self.target.maintain(conn)
                    self.tally.maintenance += 1
                except Exception as error:
                    self.tally.problem(f"maintenance beside the writers: {error!r}")
                if not self.writing.is_set():
                    return
                time.sleep(MAINTENANCE_PAUSE)

    def reader(self, allowed: dict[str, set[int]]) -> None:
        with self.target.connect() as conn:
            while True:
                try:
                    seen = read_retrying(conn, CURRENT, [SPEC.model_id])
                except duckdb.Error as error:
                    self.tally.problem(f"reader: {error!r}")
                    seen = None
                if seen is not None:
                    self.tally.reads += 1
                    found = {corpus: (n, digest) for corpus, n, digest in seen}
                    for corpus, digests in allowed.items():
                        n, digest = found.get(corpus, (0, None))
                        if n > self.rows:
                            self.tally.duplicated += 1
                            self.tally.problem(f"read: {corpus} has {n} rows, {self.rows} written")
                        elif n < self.rows or digest not in digests:
                            self.tally.partial += 1
                            self.tally.problem(f"read: {corpus} has {n} rows, hash of no whole write")
                if not self.writing.is_set():
                    return
                time.sleep(READ_PAUSE)

    def run(self, expected: dict[str, int]) -> None:
        allowed = {corpus: {digest} for corpus, digest in expected.items()}
        for (corpus, _), rows in self.frames.items():
            allowed[corpus].add(content_hash(rows))
        self.writing.set()
        writers = [threading.Thread(target=self.writer, args=(writes,)) for writes in self.owned]
        others = [threading.Thread(target=self.maintainer), threading.Thread(target=self.reader, args=(allowed,))]
        for thread in writers + others:
            thread.start()
        for thread in writers:
            thread.join()
        self.writing.clear()
        for thread in others:
            thread.join()
        for (corpus, _), rows in self.frames.items():  # in write order: the last one stays
            expected[corpus] = content_hash(rows)
            self.tally.writes += 1
            self.tally.bytes += rows.to_arrow().nbytes


def soak(target: Target, rounds: int, seconds: float, partitions: int, rows: int, writers: int) -> Tally:
    tally = Tally()
    corpora = [f"p{i:02d}" for i in range(partitions)]
    bound: int | None = None
    started = time.monotonic()
    with target.connect() as conn:
        apply_views(conn)
        upsert_model(conn, SPEC)
        for corpus in corpora:
            replace_partition(conn, {"head_summaries": write_of(corpus, 0, rows)}, SPEC.model_id, corpus)
        expected = {corpus: content_hash(write_of(corpus, 0, rows)) for corpus in corpora}
        for round_ in range(rounds):
            if time.monotonic() - started > seconds:
                break
            # write every partition, then rewrite every other one: a replaced batch per partition or two
            writes = [(corpus, 2 * round_ + 1) for corpus in corpora] + [
                (corpus, 2 * round_ + 2) for corpus in corpora[::2]
            ]
            Round(target, writes, writers, rows, tally).run(expected)
            check(conn, expected, rows, tally)
            target.maintain_quiet(conn)
            check(conn, expected, rows, tally)
            files = target.count_files()
            tally.max_files = max(tally.max_files, files)
            # the count after quiet maintenance moves a little as the merge pass groups the aggregates'
            # files (4 partitions: 14 to 17 at keep 0); growing with the rounds, it passes twice the first's
            bound = bound or 2 * files
            if files > bound:
                tally.problem(f"round {round_ + 1}: {files} files after maintenance, over {bound} (twice the first's)")
            tally.rounds += 1
            print(
                f"{target.name} round {tally.rounds}: {len(writes)} writes, {tally.reads} reads, "
                f"{tally.maintenance} maintenance passes, files {files}, {tally.lost} lost, "
                f"{tally.duplicated} duplicated, {tally.partial} partial, {time.monotonic() - started:.0f} s",
                flush=True,
            )
        for (view,) in conn.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall():
            try:
                read_retrying(conn, f'SELECT * FROM "{view}" LIMIT 1')
            except duckdb.Error as error:
                tally.problem(f"view {view} does not read: {error}")
    tally.seconds = time.monotonic() - started
    return tally


def lake_maintenance(
    keep: timedelta, orphan_floor: timedelta = ORPHAN_FLOOR
) -> Callable[[duckdb.DuckDBPyConnection], None]:
    """What the `warehouse_maintenance` asset runs, keeping snapshots `keep` (its config's least is 0)
    and orphans `orphan_floor` (the floor the asset cannot lower; 0 only with no writer left)."""

    def maintain(conn: duckdb.DuckDBPyConnection) -> None:
        expire_replaced_batches(conn)
        maintain_files(conn, keep, orphan_floor)

    return maintain


@contextmanager
def ducklake_target() -> Iterator[Target]:
    """A lake with its catalog on a new PostgreSQL and its data on moto's S3 (its own process)."""
    postgres, s3 = start_postgres(), start_s3_process()
    try:
        os.environ.update(s3.env())
        bucket = s3.create_bucket()
        config = LakeConfig(postgres.url(postgres.create_database()), f"s3://{bucket}/soak/")
        yield Target(
            "ducklake (PostgreSQL catalog, S3 data)",
            lambda: connect_lake(config),
            lake_maintenance(timedelta(0)),
            lake_maintenance(timedelta(0), timedelta(0)),
            lambda: len(s3.keys(bucket, "soak/")),
        )
    finally:
        s3.stop()
        postgres.stop()


def checkpoint(conn: duckdb.DuckDBPyConnection) -> None:
    """The DuckDB file's maintenance: fold the write-ahead log into the file. Beside another open
    transaction DuckDB refuses it (TransactionException), as the writes' own checkpoint allows."""
    try:
        conn.execute("CHECKPOINT")
    except duckdb.TransactionException:
        pass


@contextmanager
def duckdb_target() -> Iterator[Target]:
    """A DuckDB file, every thread on a cursor of one connection (one process holds the file)."""
    with tempfile.TemporaryDirectory(prefix="attn-soak-") as folder:
        database = duckdb.connect(str(Path(folder) / "warehouse.duckdb"))
        try:
            yield Target(
                "duckdb file",
                database.cursor,
                checkpoint,
                checkpoint,
                lambda: sum(1 for _ in Path(folder).iterdir()),
            )
        finally:
            database.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument(
        "--seconds", type=float, default=300, help="stop after the round that passes this (per backend)"
    )
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--rows", type=int, default=2048, help="rows per partition write")
    parser.add_argument("--writers", type=int, default=4, help="writer threads, each owning some partitions")
    parser.add_argument("--backend", choices=["both", "ducklake", "duckdb"], default="both")
    args = parser.parse_args()
    targets = {"ducklake": ducklake_target, "duckdb": duckdb_target}
    chosen = list(targets) if args.backend == "both" else [args.backend]
    summaries, failed = [], False
    for name in chosen:
        with targets[name]() as target:
            tally = soak(target, args.rounds, args.seconds, args.partitions, args.rows, args.writers)
        for problem in tally.problems[:20]:
            print(f"{name}: {problem}")
        failed |= bool(tally.problems)
        summaries.append(tally.summary(name))
    print("\n".join(summaries))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
