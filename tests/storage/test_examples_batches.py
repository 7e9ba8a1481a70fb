"""A write computed from a partition's examples (replace_partition's `examples`) commits only while
those examples are still the partition's current batch, checked in its own transaction, and records
the examples batch beside its own (batches.examples_batch_id); on the DuckDB file and on a DuckLake."""

from pathlib import Path

import duckdb
import polars as pl
import pytest

from dagster_project.storage.batches import ExamplesReplacedError, current_batch
from dagster_project.storage.lake import LakeConfig, connect_lake
from dagster_project.storage.partition_writes import replace_partition
from dagster_project.storage.schema import ensure_schema


@pytest.fixture(params=["duckdb", "ducklake"])
def conn(request: pytest.FixtureRequest, tmp_path: Path) -> duckdb.DuckDBPyConnection:
    """An empty warehouse with every table (no views: the writes and the check read tables only)."""
    if request.param == "duckdb":
        connection = duckdb.connect(str(tmp_path / "warehouse.duckdb"))
    else:
        connection = connect_lake(LakeConfig(str(tmp_path / "catalog.ducklake"), str(tmp_path / "lake-data")))
    ensure_schema(connection)
    yield connection
    connection.close()


def examples(n: int) -> pl.DataFrame:
    return pl.DataFrame({"example_id": range(n), "text_a": "a b", "n_tokens": 4, "max_len": 8, "seed": 0})


def summaries(n: int) -> pl.DataFrame:
    return pl.DataFrame({"example_id": range(n), "layer": 0, "head": 0, "n_tokens": 4})


def test_a_write_commits_only_over_the_examples_it_was_computed_from(conn: duckdb.DuckDBPyConnection) -> None:
    replace_partition(conn, {"examples": examples(12)}, "org--m", "demo", "run-a")
    replace_partition(conn, {"examples": examples(16)}, "org--m", "demo", "run-b")
    assert current_batch(conn, "examples", "org--m", "demo") == "run-b"

    with pytest.raises(ExamplesReplacedError) as error:
        replace_partition(conn, {"head_summaries": summaries(12)}, "org--m", "demo", "facts-a", {"demo": "run-a"})
    assert str(error.value).startswith(
        "the demo examples of org--m that this step works from (batch run-a) were replaced by another run "
        "(the warehouse now holds batch run-b): nothing was written"
    )
    assert conn.execute("SELECT count(*) FROM head_summaries").fetchone() == (0,)
    assert current_batch(conn, "head_summaries", "org--m", "demo") is None

    assert replace_partition(
        conn, {"head_summaries": summaries(16)}, "org--m", "demo", "facts-b", {"demo": "run-b"}
    ) == {"head_summaries": 16}
    recorded = conn.execute("SELECT batch_id, examples_batch_id FROM batches WHERE table_name = 'head_summaries'")
    assert recorded.fetchall() == [("facts-b", "run-b")]
    # a write that names no examples records none
    replace_partition(conn, {"examples": examples(16)}, "org--m", "other", "run-c")
    assert conn.execute("SELECT examples_batch_id FROM batches WHERE batch_id = 'run-c'").fetchone() == (None,)


def test_examples_of_another_corpus_are_checked_too(conn: duckdb.DuckDBPyConnection) -> None:
    """A write computed from two corpora (a probe trained on one, tested on the other) checks both."""
    replace_partition(conn, {"examples": examples(4)}, "org--m", "train", "train-1")
    replace_partition(conn, {"examples": examples(4)}, "org--m", "test", "test-1")
    with pytest.raises(ExamplesReplacedError, match="the train examples of org--m"):
        replace_partition(
            conn, {"head_summaries": summaries(4)}, "org--m", "test", "probe", {"test": "test-1", "train": "train-0"}
        )
