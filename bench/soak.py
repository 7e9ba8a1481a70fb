"""Soak: rounds of write, rewrite, maintenance and reads against the DuckLake (a PostgreSQL
catalog and S3 data, from the tests' server starters) and against the DuckDB file, checking
after every round that each partition holds its last write once (content hash), that the
`batches` table matches the rows, and that the data path's file count stays bounded after
maintenance. Bounded by --rounds and --seconds. Usage:

  OMP_WAIT_POLICY=PASSIVE .venv/bin/python -m bench.soak [--rounds 50] [--seconds 300] [--backend both]

Prints per round what it checked, then one line per backend:
`<backend>: rounds R, writes W, bytes B, 0 lost, 0 duplicated, max files F`; exits 1 on any loss,
duplicate or unbounded file count.
"""

import argparse
import os
import sys
import tempfile
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
from dagster_project.storage.lake import LakeConfig, connect_lake, maintain_files  # noqa: E402
from dagster_project.storage.model_rows import upsert_model  # noqa: E402
from dagster_project.storage.partition_writes import replace_partition  # noqa: E402
from dagster_project.storage.views import apply_views  # noqa: E402
from tests.servers import start_postgres, start_s3_process  # noqa: E402

SPEC = ModelSpec("soak--m", "soak/m", "/x", "r1", "bert", 2, 4, True)
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
    lost: int = 0
    duplicated: int = 0
    max_files: int = 0
    problems: list[str] = field(default_factory=list)

    def summary(self, backend: str) -> str:
        return (
            f"{backend}: rounds {self.rounds}, writes {self.writes}, bytes {self.bytes}, {self.lost} lost, "
            f"{self.duplicated} duplicated, max files {self.max_files}"
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


@dataclass
class Target:
    """One backend: how to connect, what maintenance is, how many files its data takes."""

    name: str
    connect: Callable[[], duckdb.DuckDBPyConnection]
    maintain: Callable[[duckdb.DuckDBPyConnection], None]
    count_files: Callable[[], int]


def check(conn: duckdb.DuckDBPyConnection, expected: dict[str, int], rows: int, tally: Tally) -> None:
    """Every partition's current rows are its last write, once; its one current batch records them."""
    found = {corpus: (n, digest) for corpus, n, digest in conn.execute(CURRENT, [SPEC.model_id]).fetchall()}
    for corpus, digest in expected.items():
        n, seen = found.get(corpus, (0, None))
        if n > rows:
            tally.duplicated += 1
            tally.problems.append(f"{corpus}: {n} current rows, {rows} written")
        elif n < rows or seen != digest:
            tally.lost += 1
            tally.problems.append(f"{corpus}: {n} current rows, hash {'as written' if seen == digest else 'differs'}")
    for corpus, current_batches, n_rows, stored in conn.execute(BATCHES_AGAINST_ROWS, [SPEC.model_id]).fetchall():
        if current_batches != 1 or n_rows != stored or n_rows != rows:
            tally.duplicated += current_batches > 1
            tally.problems.append(f"{corpus}: {current_batches} current batches, {n_rows} recorded, {stored} stored")


def soak(target: Target, rounds: int, seconds: float, partitions: int, rows: int) -> Tally:
    tally = Tally()
    corpora = [f"p{i:02d}" for i in range(partitions)]
    expected: dict[str, int] = {}
    bound: int | None = None
    started = time.monotonic()
    with target.connect() as conn:
        apply_views(conn)
        upsert_model(conn, SPEC)
        for round_ in range(rounds):
            if time.monotonic() - started > seconds:
                break
            # write every partition, then rewrite every other one: a replaced batch per partition or two
            writes = [(corpus, 2 * round_) for corpus in corpora] + [
                (corpus, 2 * round_ + 1) for corpus in corpora[::2]
            ]
            for corpus, version in writes:
                rows_written = frame(rows, zlib.crc32(f"{corpus}/{version}".encode()))
                replace_partition(conn, {"head_summaries": rows_written}, SPEC.model_id, corpus)
                expected[corpus] = content_hash(rows_written)
                tally.writes += 1
                tally.bytes += rows_written.to_arrow().nbytes
            check(conn, expected, rows, tally)
            target.maintain(conn)
            check(conn, expected, rows, tally)
            files = target.count_files()
            tally.max_files = max(tally.max_files, files)
            bound = bound or files  # the first round's count after maintenance: the steady state
            if files > bound:
                tally.problems.append(f"round {round_ + 1}: {files} files after maintenance, {bound} after the first")
            tally.rounds += 1
            print(
                f"{target.name} round {tally.rounds}: {len(writes)} writes, files {files}, "
                f"{tally.lost} lost, {tally.duplicated} duplicated, {time.monotonic() - started:.0f} s",
                flush=True,
            )
    return tally


def lake_maintenance(conn: duckdb.DuckDBPyConnection) -> None:
    """What the `warehouse_maintenance` asset runs; nothing else writes meanwhile, so nothing is kept."""
    expire_replaced_batches(conn)
    maintain_files(conn, timedelta(0))


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
            lake_maintenance,
            lambda: len(s3.keys(bucket, "soak/")),
        )
    finally:
        s3.stop()
        postgres.stop()


@contextmanager
def duckdb_target() -> Iterator[Target]:
    """A DuckDB file; its writes delete replaced rows, and a CHECKPOINT folds the log into the file."""
    with tempfile.TemporaryDirectory(prefix="attn-soak-") as folder:
        database = Path(folder) / "warehouse.duckdb"
        yield Target(
            "duckdb file",
            lambda: duckdb.connect(str(database)),
            lambda conn: conn.execute("CHECKPOINT"),
            lambda: sum(1 for _ in Path(folder).iterdir()),
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument(
        "--seconds", type=float, default=300, help="stop after the round that passes this (per backend)"
    )
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--rows", type=int, default=2048, help="rows per partition write")
    parser.add_argument("--backend", choices=["both", "ducklake", "duckdb"], default="both")
    args = parser.parse_args()
    targets = {"ducklake": ducklake_target, "duckdb": duckdb_target}
    chosen = list(targets) if args.backend == "both" else [args.backend]
    summaries, failed = [], False
    for name in chosen:
        with targets[name]() as target:
            tally = soak(target, args.rounds, args.seconds, args.partitions, args.rows)
        for problem in tally.problems[:20]:
            print(f"{name}: {problem}")
        failed |= bool(tally.problems)
        summaries.append(tally.summary(name))
    print("\n".join(summaries))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
