"""Soak: rounds in which writer threads rewrite partitions while maintenance runs in a loop at its
most aggressive setting and a reader polls every partition, against the DuckLake (a PostgreSQL
catalog and S3 data, from the tests' server starters) and against the DuckDB file. Every read
checks each partition is one whole write (row count and content hash: none partial, none
duplicated); after every round each partition holds its last write once (content hash) and the
`batches` table matches the rows; after the first round, every --quiet-every rounds and the last,
maintenance runs with nothing else writing and the data path's file count must stay within twice
the first such count; at the end every view reads. Bounded by --rounds and --seconds. Usage:

  OMP_WAIT_POLICY=PASSIVE .venv/bin/python -m bench.soak [--rounds 50] [--seconds 900] [--backend both]

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
from dagster_project.storage.batches import expire_replaced_batches  # noqa: E402
from dagster_project.storage.lake import (  # noqa: E402
    ORPHAN_FLOOR,
    LakeConfig,
    connect_lake,
    maintain_files,
    read_retrying,
)
from dagster_project.storage.model_rows import upsert_model  # noqa: E402
from dagster_project.storage.partition_writes import replace_partition  # noqa: E402
from dagster_project.storage.views import apply_views  # noqa: E402
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


class Background:
    """Maintenance in a loop and a reader in a loop, each on its own connection, from start() to stop().
    Every read must see each partition as one whole write (its row count, and the content hash of a
    version written to it); `quiet()` holds maintenance back while the caller maintains alone."""

    def __init__(self, target: Target, rows: int, tally: Tally):
        self.target, self.rows, self.tally = target, rows, tally
        self.written: dict[str, set[int]] = {}  # partition -> content hashes of every version written to it
        self.running = threading.Event()
        self.maintaining = threading.Lock()
        self.threads = [threading.Thread(target=self.maintainer), threading.Thread(target=self.reader)]

    def start(self) -> None:
        self.running.set()
        for thread in self.threads:
            thread.start()

    def stop(self) -> None:
        self.running.clear()
        for thread in self.threads:
            thread.join()

    @contextmanager
    def quiet(self) -> Iterator[None]:
        with self.maintaining:
            yield

    def maintainer(self) -> None:
        with self.target.connect() as conn:
            while self.running.is_set():
                with self.maintaining:
                    try:
                        self.target.maintain(conn)
                        self.tally.maintenance += 1
                    except Exception as error:
                        self.tally.problem(f"maintenance beside the writers: {error!r}")
                time.sleep(MAINTENANCE_PAUSE)

    def reader(self) -> None:
        with self.target.connect() as conn:
            while self.running.is_set():
                try:
                    seen = read_retrying(conn, CURRENT, [SPEC.model_id])
                except duckdb.Error as error:
                    self.tally.problem(f"reader: {error!r}")
                    continue
                self.tally.reads += 1
                # taken after the read: every version it can see was added before its write began
                written = dict(self.written)
                found = {corpus: (n, digest) for corpus, n, digest in seen}
                for corpus, digests in written.items():
                    n, digest = found.get(corpus, (0, None))
                    if n > self.rows:
                        self.tally.duplicated += 1
                        self.tally.problem(f"read: {corpus} has {n} rows, {self.rows} written")
                    elif n < self.rows or digest not in digests:
                        self.tally.partial += 1
                        self.tally.problem(f"read: {corpus} has {n} rows, hash of no whole write")
                time.sleep(READ_PAUSE)


def write_round(
    target: Target, writes: list[tuple[str, int]], writers: int, rows: int, background: Background, tally: Tally
) -> dict[str, int]:
    """The writes, by `writers` threads each owning some partitions (writing them in order); returns
    each written partition's last write's content hash."""
    frames = {write: write_of(*write, rows) for write in writes}
    hashes = {write: content_hash(frame) for write, frame in frames.items()}
    for (corpus, _), digest in hashes.items():
        background.written[corpus] = background.written.get(corpus, set()) | {digest}
    corpora = sorted({corpus for corpus, _ in writes})

    def writer(owned: list[tuple[str, int]]) -> None:
        try:
            with target.connect() as conn:
                for corpus, version in owned:
                    replace_partition(conn, {"head_summaries": frames[corpus, version]}, SPEC.model_id, corpus)
        except Exception as error:
            tally.problem(f"writer: {error!r}")

    threads = [
        threading.Thread(target=writer, args=([w for w in writes if corpora.index(w[0]) % writers == i],))
        for i in range(writers)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    tally.writes += len(writes)
    tally.bytes += sum(frame.to_arrow().nbytes for frame in frames.values())
    return {corpus: hashes[corpus, version] for corpus, version in writes}  # later writes win


def soak(
    target: Target, rounds: int, seconds: float, partitions: int, rows: int, writers: int, quiet_every: int
) -> Tally:
    """Rounds of writes beside background maintenance and reads; each partition checked after every
    round, the file count after quiet maintenance (nothing else running) after the first round,
    every `quiet_every` rounds and the last."""
    tally = Tally()
    corpora = [f"p{i:02d}" for i in range(partitions)]
    bound: int | None = None
    started = time.monotonic()
    with target.connect() as conn:
        apply_views(conn)
        upsert_model(conn, SPEC)
        background = Background(target, rows, tally)
        expected = write_round(target, [(corpus, 0) for corpus in corpora], writers, rows, background, tally)
        background.start()
        try:
            for round_ in range(rounds):
                # write every partition, then rewrite every other one: a replaced batch per partition or two
                writes = [(corpus, 2 * round_ + 1) for corpus in corpora]
                writes += [(corpus, 2 * round_ + 2) for corpus in corpora[::2]]
                expected |= write_round(target, writes, writers, rows, background, tally)
                check(conn, expected, rows, tally)
                tally.rounds += 1
                last = round_ == rounds - 1 or time.monotonic() - started > seconds
                files = None
                if round_ == 0 or last or tally.rounds % quiet_every == 0:
                    with background.quiet():
                        target.maintain_quiet(conn)
                        files = target.count_files()
                    check(conn, expected, rows, tally)
                    tally.max_files = max(tally.max_files, files)
                    # the count after quiet maintenance moves a little as the merge pass groups the
                    # aggregates' files (4 partitions: 14 to 17); growing with the rounds, it passes twice the first
                    bound = bound or 2 * files
                    if files > bound:
                        tally.problem(f"round {tally.rounds}: {files} files after quiet maintenance, over {bound}")
                print(
                    f"{target.name} round {tally.rounds}: {len(writes)} writes, {tally.reads} reads, "
                    f"{tally.maintenance} maintenance passes, {'' if files is None else f'files {files}, '}"
                    f"{tally.lost} lost, {tally.duplicated} duplicated, {tally.partial} partial, "
                    f"{time.monotonic() - started:.0f} s",
                    flush=True,
                )
                if last:
                    break
        finally:
            background.stop()
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
        "--seconds", type=float, default=900, help="stop after the round that passes this (per backend)"
    )
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--rows", type=int, default=256, help="rows per partition write")
    parser.add_argument("--writers", type=int, default=4, help="writer threads, each owning some partitions")
    parser.add_argument(
        "--quiet-every", type=int, default=10, help="rounds between file counts after quiet maintenance"
    )
    parser.add_argument("--backend", choices=["both", "ducklake", "duckdb"], default="both")
    args = parser.parse_args()
    targets = {"ducklake": ducklake_target, "duckdb": duckdb_target}
    chosen = list(targets) if args.backend == "both" else [args.backend]
    summaries, failed = [], False
    for name in chosen:
        with targets[name]() as target:
            tally = soak(target, args.rounds, args.seconds, args.partitions, args.rows, args.writers, args.quiet_every)
        for problem in tally.problems[:20]:
            print(f"{name}: {problem}")
        failed |= bool(tally.problems)
        summaries.append(tally.summary(name))
    print("\n".join(summaries))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
