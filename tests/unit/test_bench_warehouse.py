"""bench/bench_warehouse.py's replication: the tiny BERT's demo partition copied under new model ids
in SQL, on a warehouse with this checkout's schema and views."""

import duckdb
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from bench.bench_warehouse import partitioned_tables, replicate_model
from dagster_project.compute.attention_pass import extract_attention_facts
from dagster_project.compute.models import LoadedEncoder
from dagster_project.settings import SQL_DIR
from dagster_project.storage.model_rows import upsert_model
from dagster_project.storage.partition_writes import refresh_aggregates, replace_partition
from dagster_project.storage.views import apply_views

COPIES = ["bench-copy-001", "bench-copy-002"]


@pytest.fixture
def warehouse(encoder: LoadedEncoder, demo_tokens: pl.DataFrame) -> duckdb.DuckDBPyConnection:
    """One model's demo partition (tokens, head summaries, position histograms), written as the assets do."""
    conn = duckdb.connect(":memory:")
    apply_views(conn)
    upsert_model(conn, encoder.spec)
    facts = extract_attention_facts(encoder, demo_tokens)
    replace_partition(conn, {"tokens": demo_tokens, **facts.tables}, encoder.spec.model_id, "demo")
    yield conn
    conn.close()


def rows_per_model(conn: duckdb.DuckDBPyConnection, table: str) -> dict[str, int]:
    return dict(conn.execute(f"SELECT model_id, count(*) FROM {table} GROUP BY ALL").fetchall())


def test_every_partitioned_table_is_copied_once_per_new_model(
    warehouse: duckdb.DuckDBPyConnection, encoder: LoadedEncoder, demo_tokens: pl.DataFrame
) -> None:
    source = encoder.spec.model_id
    before = {table: rows_per_model(warehouse, table).get(source, 0) for table in partitioned_tables(warehouse)}
    assert before["head_summaries"] == 12 * 2 * 4  # demo pairs x layers x heads of the tiny BERT
    assert before["tokens"] == demo_tokens.height

    replicate_model(warehouse, source, COPIES)

    for table, count in before.items():
        counts = rows_per_model(warehouse, table)
        assert sum(counts.values()) == 3 * count, table
        if count:
            assert counts == {source: count, **dict.fromkeys(COPIES, count)}, table
    assert warehouse.execute(
        "SELECT model_id, source, n_layers, n_heads FROM models ORDER BY ALL"
    ).fetchall() == sorted([(source, encoder.spec.source, 2, 4), *((copy, copy, 2, 4) for copy in COPIES)])
    # each copy's partitions are current batches of their own, with the source's row counts
    staged = warehouse.execute(
        "SELECT model_id, table_name, corpus, n_rows, batch_id FROM stg_batches ORDER BY table_name, model_id"
    ).pl()
    source_batches = staged.filter(pl.col("model_id") == source)
    for copy in COPIES:
        copied = staged.filter(pl.col("model_id") == copy)
        assert copied.drop("model_id", "batch_id").equals(source_batches.drop("model_id", "batch_id"))
        assert copied["batch_id"].to_list() == [f"{batch}:{copy}" for batch in source_batches["batch_id"]]


def results_by_model(conn: duckdb.DuckDBPyConnection, view: str) -> dict[str, pl.DataFrame]:
    """A results view's rows per model_id in one order, the model's own id and name (in any column,
    as kovaleva_pattern_shares' base_model_id) written as `<self>`. Sums may differ in the last bits
    (DuckDB adds a partition's rows in no fixed order), so frames compare to 1e-12."""
    names = dict(conn.execute("SELECT model_id, source FROM models").fetchall())
    rows = conn.execute(f"SELECT * FROM {view}").pl()
    by_model = {}
    for model_id in rows["model_id"].unique():
        own = rows.filter(pl.col("model_id") == model_id)
        text = [column for column, dtype in own.schema.items() if dtype == pl.String]
        own = own.with_columns(pl.col(text).replace({model_id: "<self>", names[model_id]: "<self>"}))
        by_model[model_id] = own.sort(pl.all())
    return by_model


RESULTS_VIEWS = sorted(path.stem for path in (SQL_DIR / "results").glob("*.sql"))


def test_every_results_view_shows_each_copy_with_the_source_numbers(
    warehouse: duckdb.DuckDBPyConnection, encoder: LoadedEncoder
) -> None:
    source = encoder.spec.model_id
    replicate_model(warehouse, source, COPIES)
    filled = []
    for view in RESULTS_VIEWS:
        by_model = results_by_model(warehouse, view)
        if not by_model:  # a view over facts this partition has not (coreference, HTA, ...)
            continue
        filled.append(view)
        assert sorted(by_model) == sorted([source, *COPIES]), view
        for copy in COPIES:
            assert_frame_equal(by_model[copy], by_model[source], rel_tol=1e-12, abs_tol=1e-12)
    # what head summaries, position histograms and tokens feed
    assert filled == [
        "clark_entropy",
        "clark_relative_position",
        "clark_special_tokens",
        "compare_weightings_special_tokens",  # the attention rows: every pass has them
        "kovaleva_pattern_shares",
        "pascual_attention_histograms",
        "pascual_center_of_mass",
        "reproduction_scorecard",  # every claim judged alike: missing, for want of the papers' corpora
        "scorecard_matrix",
    ]


def test_copies_refreshed_from_their_facts_give_the_source_numbers(
    warehouse: duckdb.DuckDBPyConnection, encoder: LoadedEncoder
) -> None:
    """What the bench does after a copy: the copies' aggregates recomputed from the copied facts."""
    source = encoder.spec.model_id
    replicate_model(warehouse, source, COPIES)
    for copy in COPIES:
        refresh_aggregates(warehouse, copy, "demo")
    for view in ("clark_entropy", "pascual_attention_histograms", "clark_relative_position", "kovaleva_pattern_shares"):
        by_model = results_by_model(warehouse, view)
        assert sorted(by_model) == sorted([source, *COPIES]), view
        for copy in COPIES:
            assert_frame_equal(by_model[copy], by_model[source], rel_tol=1e-12, abs_tol=1e-12)


def test_a_taken_or_unknown_model_id_is_refused_and_nothing_written(
    warehouse: duckdb.DuckDBPyConnection, encoder: LoadedEncoder
) -> None:
    source = encoder.spec.model_id
    with pytest.raises(ValueError, match="already in the warehouse"):
        replicate_model(warehouse, source, ["bench-copy-001", source])
    with pytest.raises(LookupError, match="no-such-model"):
        replicate_model(warehouse, "no-such-model", COPIES)
    assert rows_per_model(warehouse, "head_summaries") == {source: 96}
    assert rows_per_model(warehouse, "models") == {source: 1}
