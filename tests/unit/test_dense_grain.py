"""The dense grain of position_histograms, contribution_histograms and relation_hits: what the
extraction builds (hand-computed histograms), what the stg_ views unnest (the flat rows that were
written, weight sums to the schema's precision), and an old flat-grain warehouse, migrated."""

import math
from pathlib import Path

import duckdb
import numpy as np
import polars as pl
import pytest
import torch

from dagster_project.compute.batching import histogram_frame, histogram_rows
from dagster_project.compute.metrics import TokenMasks, relative_position_histogram
from dagster_project.compute.models import ModelSpec
from dagster_project.storage import dense_grain
from dagster_project.storage.lake import LakeConfig, connect_lake
from dagster_project.storage.model_rows import upsert_model
from dagster_project.storage.partition_writes import replace_partition
from dagster_project.storage.views import apply_views

SPEC = ModelSpec("org--m", "org/m", "/x", "r1", "bert", 1, 2, True)
PRECISION = 2.0**-23  # times sqrt(mean): the error of a stored mean weight (sql/schema/position_histograms.sql)

# [CLS] a b [SEP] (example 7) and [CLS] [SEP] padded to 4 (example 9); one layer, one head.
MAPS = torch.tensor(
    [
        [[0.5, 0.25, 0.125, 0.125], [0.25, 0.5, 0.25, 0.0], [0.0, 0.75, 0.25, 0.0], [0.125, 0.125, 0.25, 0.5]],
        [[0.25, 0.75, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]],
    ]
)[:, None, None]
MASKS = TokenMasks(
    valid=torch.tensor([[True] * 4, [True, True, False, False]]),
    cls=torch.tensor([[True, False, False, False], [True, False, False, False]]),
    sep=torch.tensor([[False, False, False, True], [False, True, False, False]]),
    punct=torch.zeros(2, 4, dtype=torch.bool),
)


def test_histogram_frame_holds_counts_and_one_plus_mean_per_offset():
    rows = histogram_frame(MAPS, MASKS, torch.tensor([7, 9])).sort("example_id", "scope")
    assert rows.select("example_id", "scope", "layer", "head").rows() == [
        (7, "all", 1, 1),
        (7, "content", 1, 1),
        (9, "all", 1, 1),  # no content token: no content row
    ]
    assert rows["pair_counts"].to_list() == [[1, 2, 3, 4, 3, 2, 1], [1, 2, 1], [1, 2, 1]]
    # example 7, all: offset -3 is A[3,0] = 0.125; -2: (A[2,0] + A[3,1]) / 2 = 0.0625; -1: (0.25 + 0.75 + 0.25) / 3;
    # 0: the diagonal's mean (0.5 + 0.5 + 0.25 + 0.5) / 4; +1: (0.25 + 0.25 + 0) / 3; +2: (0.125 + 0) / 2; +3: 0.125.
    means = [[0.125, 0.0625, 1.25 / 3, 1.75 / 4, 0.5 / 3, 0.0625, 0.125], [0.75, 0.375, 0.25], [1.0, 0.125, 0.75]]
    for stored, expected in zip(rows["one_plus_sqrt_mean_weights"].to_list(), means):
        assert stored == pytest.approx([1 + math.sqrt(m) for m in expected], abs=2.0**-24)  # one FLOAT rounding
    flat = histogram_rows(rows, "attention").filter(pl.col("example_id") == 7, pl.col("scope") == "all")
    assert flat["offset"].to_list() == [-3, -2, -1, 0, 1, 2, 3]
    assert flat["weight_sum"].to_list() == pytest.approx([0.125, 0.125, 1.25, 1.75, 0.5, 0.125, 0.125], abs=1e-6)
    assert set(flat["kind"]) == {"attention"}


def test_stored_means_keep_2_to_the_minus_24():
    maps = torch.softmax(torch.randn(3, 2, 2, 40, 40, generator=torch.Generator().manual_seed(0)), -1)
    masks = TokenMasks(torch.ones(3, 40, dtype=torch.bool), *(torch.zeros(3, 40, dtype=torch.bool),) * 3)
    dense = histogram_frame(maps, masks, torch.arange(3))
    # the pair counts, the same for every head, are on each (example, scope)'s row of layer 1, head 1 only
    holders = dense.filter(pl.col("pair_counts").is_not_null())
    assert holders.height == 3 * 2 and set(holders.select("layer", "head").rows()) == {(1, 1)}
    rows = histogram_rows(dense, "attention").filter(pl.col("scope") == "all")
    assert rows.height == 3 * 4 * 79 and rows["pair_count"].to_list()[:79] == [40 - abs(d) for d in range(-39, 40)]
    sums, _ = relative_position_histogram(maps, torch.ones(3, 40, 40, dtype=torch.bool))  # what the pass encodes
    mean = sums.reshape(-1).double().numpy() / rows["pair_count"].to_numpy()
    error = np.abs(rows["weight_sum"].to_numpy() / rows["pair_count"].to_numpy() - mean)
    # the stored sqrt's rounding (2^-24 on sqrt(m), so 2^-23 sqrt(m) on m), and the staged FLOAT's (2^-24 m)
    assert (error <= PRECISION * np.sqrt(mean) + 2.0**-24 * mean + 1e-12).all()
    assert error.max() > 0  # (not exact: the test would not see a coarser rounding otherwise)
    assert (error / mean).max() < 2e-6  # small means stay relatively precise (a linear code would give ~1e-3 here)


def _flat_histograms() -> pl.DataFrame:
    """Rows of the flat grain with a gap (offsets -1 and 1 of example 3 missing), two layers, two examples."""
    return pl.DataFrame(
        {
            "example_id": [3] * 6 + [4] * 2,
            "kind": ["attention"] * 8,
            "scope": ["all"] * 6 + ["content"] * 2,
            "layer": [1, 1, 1, 2, 2, 2, 1, 1],
            "head": [2] * 8,
            "offset": [-2, 0, 2, -2, 0, 2, -1, 1],
            "weight_sum": [0.1, 2.5, 0.3, 0.75, 1.5, 0.25, 0.2, 0.4],
            "pair_count": [1, 3, 1, 1, 3, 1, 1, 1],
        },
        schema_overrides={"layer": pl.Int16, "head": pl.Int16, "offset": pl.Int16, "weight_sum": pl.Float32},
    )


def _flat_hits() -> pl.DataFrame:
    """Hits of words 0, 1 and 3 (word 2 has no pieces) of one example, layer 1, heads 1 and 2."""
    return pl.DataFrame(
        {
            "example_id": [5] * 6,
            "word_index": [0, 1, 3] * 2,
            "layer": [1] * 6,
            "head": [1, 1, 1, 2, 2, 2],
            "target_word": [1, 0, 1, 3, 3, 0],
            "word_mode": ["mean"] * 6,
        },
        schema_overrides={"layer": pl.Int16, "head": pl.Int16},
    )


def _staged(conn: duckdb.DuckDBPyConnection, view: str, columns: list[str]) -> pl.DataFrame:
    quoted = ", ".join(f'"{name}"' for name in columns)
    return conn.execute(f"SELECT {quoted} FROM {view}").pl().sort(columns)


def _assert_staged_as_written(conn: duckdb.DuckDBPyConnection) -> None:
    keys = ["example_id", "kind", "scope", "layer", "head", "offset", "pair_count"]
    written, staged = _flat_histograms().sort(keys), _staged(conn, "stg_position_histograms", [*keys, "weight_sum"])
    assert staged.select(keys).equals(written.select(keys).cast(staged.select(keys).schema))  # the gap stays a gap
    assert staged["weight_sum"].to_list() == pytest.approx(written["weight_sum"].to_list(), abs=3 * PRECISION)
    hit_columns = list(_flat_hits().columns)
    hits = _staged(conn, "stg_relation_hits", hit_columns)
    assert hits.equals(_flat_hits().sort(hit_columns).cast(hits.schema))


def test_flat_rows_written_are_packed_and_staged_back(conn: duckdb.DuckDBPyConnection):
    upsert_model(conn, SPEC)
    replace_partition(conn, {"position_histograms": _flat_histograms(), "relation_hits": _flat_hits()}, "org--m", "ud")
    rows = conn.execute("SELECT layer, pair_counts FROM position_histograms WHERE scope = 'all' ORDER BY layer")
    assert rows.fetchall() == [(1, [1, 0, 3, 0, 1]), (2, None)]  # the counts on the first head only
    targets = conn.execute("SELECT head, target_words FROM relation_hits ORDER BY head").fetchall()
    assert targets == [(1, [1, 0, None, 1]), (2, [3, 3, None, 0])]
    _assert_staged_as_written(conn)


# The flat grain's tables as warehouses before the dense grain had them.
FLAT_TABLES = (
    "CREATE TABLE position_histograms (model_id VARCHAR NOT NULL, corpus VARCHAR NOT NULL, example_id INTEGER NOT NULL,"
    ' kind VARCHAR NOT NULL, scope VARCHAR NOT NULL, layer SMALLINT NOT NULL, head SMALLINT NOT NULL, "offset" SMALLINT'
    " NOT NULL, weight_sum FLOAT NOT NULL, pair_count INTEGER NOT NULL, batch_id VARCHAR)",
    "CREATE TABLE relation_hits (model_id VARCHAR NOT NULL, corpus VARCHAR NOT NULL, example_id INTEGER NOT NULL,"
    " word_index INTEGER NOT NULL, layer SMALLINT NOT NULL, head SMALLINT NOT NULL, target_word INTEGER NOT NULL,"
    " word_mode VARCHAR NOT NULL, batch_id VARCHAR)",
)


@pytest.mark.parametrize("backend", ["duckdb", "ducklake"])
def test_an_old_flat_grain_warehouse_is_migrated_when_opened(
    tmp_path: Path, backend: str, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(dense_grain, "ROWS_PER_PACKING", 2)  # several slices, each example's rows in one
    if backend == "duckdb":
        conn = duckdb.connect(str(tmp_path / "old.duckdb"))
    else:
        conn = connect_lake(LakeConfig(str(tmp_path / "catalog.ducklake"), str(tmp_path / "lake-data")))
    with conn:
        for statement in FLAT_TABLES:
            conn.execute(statement)
        for table, frame in (("position_histograms", _flat_histograms()), ("relation_hits", _flat_hits())):
            conn.register("old_rows", frame.with_columns(model_id=pl.lit("org--m"), corpus=pl.lit("ud")))
            conn.execute(f"INSERT INTO {table} BY NAME SELECT * FROM old_rows")  # no batch: before batches too
            conn.unregister("old_rows")
        if backend == "ducklake":  # a lake's batches were recorded from its first write
            conn.execute("UPDATE position_histograms SET batch_id = 'b1'")
            conn.execute("UPDATE relation_hits SET batch_id = 'b1'")
        apply_views(conn)
        upsert_model(conn, SPEC)
        if backend == "ducklake":
            conn.execute(
                "INSERT INTO batches BY NAME SELECT unnest(['position_histograms', 'relation_hits']) AS table_name, "
                "'org--m' AS model_id, 'ud' AS corpus, 'b1' AS batch_id, now()::TIMESTAMP AS written_at, 1 AS n_rows"
            )
        columns = {row[0] for row in conn.execute("DESCRIBE position_histograms").fetchall()}
        assert {"pair_counts", "one_plus_sqrt_mean_weights"} <= columns and "offset" not in columns
        assert conn.execute("SELECT count(*) FROM position_histograms").fetchone() == (3,)
        _assert_staged_as_written(conn)
        apply_views(conn)  # opened again: nothing left to migrate
        _assert_staged_as_written(conn)
