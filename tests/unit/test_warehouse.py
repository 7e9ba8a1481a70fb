"""Warehouse writes and the SQL views, on fixture tables with hand-computed answers, and the
layering of the views (staging -> intermediate -> results)."""

import dataclasses
import json
import re
from graphlib import CycleError
from pathlib import Path

import duckdb
import polars as pl
import pytest

from dagster_project import settings
from dagster_project.compute.models import ModelSpec
from dagster_project.storage import sql_files
from dagster_project.storage.backend import WarehouseConfig
from dagster_project.storage.batches import partition_rows
from dagster_project.storage.claims import JUDGMENTS_VIEW, load_claims
from dagster_project.storage.connections import WarehouseFullError
from dagster_project.storage.dense_grain import DENSE_TABLES
from dagster_project.storage.lake import LakeConfigError
from dagster_project.storage.model_rows import record_reproduction, reproduction_profile, upsert_model
from dagster_project.storage.partition_writes import _write_failure, replace_partition
from dagster_project.storage.schema import PARTITIONED_TABLES, WEIGHTED_TABLES, schema_columns
from dagster_project.storage.sql_files import VIEW_LAYERS, WEIGHTED_STAGING, View, strip_sql_comments, view_definitions
from dagster_project.storage.views import apply_views

SPEC = ModelSpec("org--m", "org/m", "/x", "r1", "bert", 1, 2, True)


def _summaries(example_id: int, n_tokens: int, to_cls: float, entropy: float) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "example_id": [example_id, example_id],
            "layer": [1, 1],
            "head": [1, 2],
            "n_tokens": [n_tokens, n_tokens],
            "to_cls": [to_cls, 0.0],
            "to_sep": [0.5, 0.5],
            "to_prev": [1.0, 0.0],
            "entropy": [entropy, 0.0],
            "cls_entropy": [entropy, 0.0],
        }
    )


def _histogram(sums: list[float], counts: list[int], head: int = 1, kind: str = "attention") -> pl.DataFrame:
    return pl.DataFrame(
        {
            "example_id": [0] * 3,
            "kind": [kind] * 3,
            "scope": ["all"] * 3,
            "layer": [1] * 3,
            "head": [head] * 3,
            "offset": [-1, 0, 1],
            "weight_sum": sums,
            "pair_count": counts,
        }
    )


def _relations_read(view: View) -> set[str]:
    """The tables and views a view's query reads, as DuckDB parses it (its CTEs left out)."""
    query = re.sub(r"(?is)^.*?CREATE\s+OR\s+REPLACE\s+VIEW\s+\w+\s+AS\s", "", view.sql, count=1)
    (serialized,) = duckdb.execute("SELECT json_serialize_sql(?)", [query]).fetchone()
    tree = json.loads(serialized)
    assert not tree["error"], (view.name, tree)
    tables: set[str] = set()
    ctes: set[str] = set()

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if node.get("type") == "BASE_TABLE":
                tables.add(node["table_name"])
            ctes.update(entry["key"] for entry in node.get("cte_map", {}).get("map", []))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(tree)
    return tables - ctes


def test_views_are_ordered_by_dependency():
    names = [view.name for view in view_definitions()]
    assert (
        names.index("int_position_profiles")
        < names.index("int_head_centers_of_mass")
        < names.index("pascual_center_of_mass")
    )
    assert {view.layer for view in view_definitions()} == set(VIEW_LAYERS)
    for view in view_definitions():  # every view it reads (as DuckDB parses it) is created before it
        earlier = set(names[: names.index(view.name)])
        assert _relations_read(view) - set(schema_columns()) <= earlier, view.name


def _write_views(folder: Path, views: dict[str, str]) -> None:
    for layer in VIEW_LAYERS:
        (folder / layer).mkdir(parents=True)
    for name, sql in views.items():
        (folder / "results" / f"{name}.sql").write_text(sql)


def test_view_order_ignores_names_in_comments_and_strings(tmp_path, monkeypatch):
    # `a` names `b` only in comments and a string; counted as a reference, that would be a cycle.
    _write_views(
        tmp_path,
        {
            "a": "-- a is read by b\n/* b reads a,\n   so a must come first */\n"
            "CREATE OR REPLACE VIEW a AS SELECT 'b' AS label, 1 AS \"x--y\";\n",
            "b": "CREATE OR REPLACE VIEW b AS SELECT * FROM a; -- not from a_b\n",
        },
    )
    monkeypatch.setattr(sql_files, "SQL_DIR", tmp_path)
    assert [view.name for view in view_definitions()] == ["a", "b"]
    # the dependency rule itself: a name in the code (not a comment) is a dependency
    (tmp_path / "results" / "a.sql").write_text("CREATE OR REPLACE VIEW a AS SELECT * FROM b;\n")
    with pytest.raises(CycleError):
        view_definitions()


def test_strip_sql_comments_keeps_code_and_quoted_identifiers():
    sql = "SELECT 'it''s -- no comment' AS \"a--b\", 1 /* x */ - 2 -- end\nFROM t"
    assert strip_sql_comments(sql) == "SELECT '' AS \"a--b\", 1   - 2  \nFROM t"


def test_partitioned_tables_come_from_the_schema_files():
    tables = schema_columns()
    assert len(tables) == len(list((Path(sql_files.SQL_DIR) / "schema").glob("*.sql")))
    assert PARTITIONED_TABLES == set(tables) - {"models", "batches", "reproductions", "claims"}
    assert all({"model_id", "corpus", "batch_id"} <= set(tables[table]) for table in PARTITIONED_TABLES)
    assert "word_index" in tables["tokens"]  # columns added by an ALTER count too


def test_every_table_has_a_staging_view_with_all_its_columns(conn):
    staging = {view.name: view for view in view_definitions() if view.layer == "staging"}
    tables = schema_columns()
    # a table with rows per weighting has a second view, stg_weighted_<table>, with every weighting's rows
    weighted = {f"{WEIGHTED_STAGING}{table}": table for table in WEIGHTED_TABLES}
    assert set(staging) == {f"stg_{table}" for table in tables} | set(weighted)
    assert WEIGHTED_TABLES == {
        "head_summaries",
        "position_histograms",
        "relation_hits",
        "saliency_correlations",
        "hta_agreement",
        "agg_hta_agreement_means",
    }
    assert _relations_read(staging["stg_batches"]) == {"batches"}
    for view, table in [*((f"stg_{table}", table) for table in PARTITIONED_TABLES), *weighted.items()]:
        # the rows of the current batch (stg_batches), with the model's readable columns and without batch_id
        assert {table, "stg_batches"} <= _relations_read(staging[view]) <= {table, "models", "stg_batches"}
        staged = [row[0] for row in conn.execute(f"DESCRIBE {view}").fetchall()]
        expected = set(tables[table]) - {"batch_id"} | {"model"}
        if table in DENSE_TABLES:  # its lists unnested to the flat grain: a row per offset or word, keyed by it
            lists = {name for name, kind, *_ in conn.execute(f"DESCRIBE {table}").fetchall() if kind.endswith("[]")}
            expected = expected - lists | {DENSE_TABLES[table][0]}
        assert set(staged) >= expected and "batch_id" not in staged, view


def test_only_staging_reads_tables_and_joins_models():
    tables = set(schema_columns())
    views = view_definitions()
    results = {other.name for other in views if other.layer == "results"}
    for view in views:
        read = _relations_read(view)
        if view.layer == "staging":
            continue
        # intermediate and results views read staged and intermediate views, never a raw table; the
        # claims' judgments (generated from sql/claims) read the results views they judge, and the
        # scorecard reads the judgments, and the matrix of every model the scorecard
        judged = results if view.name == JUDGMENTS_VIEW else {JUDGMENTS_VIEW}
        judged |= {"reproduction_scorecard"} if view.name == "scorecard_matrix" else set()
        assert all(name.startswith(("stg_", "int_")) or name in judged for name in read), (view.name, read)
        assert not read & tables, (view.name, read & tables)
        assert not re.search(r"\bmodels\b", strip_sql_comments(view.sql)), view.name
        if view.layer == "intermediate":
            assert view.name.startswith("int_")


def test_every_view_selects_on_an_empty_warehouse(conn: duckdb.DuckDBPyConnection):
    for view in view_definitions():
        expected = len(load_claims()) if view.name == "stg_claims" else 0  # the claims come with the views
        assert conn.execute(f"SELECT count(*) FROM {view.name}").fetchone() == (expected,)
    assert apply_views(conn) == [view.name for view in view_definitions()]  # idempotent


def test_head_means_weigh_examples_equally(conn):
    # docs/methods.md §3.1: the results views show the mean of per-example means (mean_over =
    # 'examples'); int_head_attention_means also has the token-weighted means (mean_over = 'tokens')
    upsert_model(conn, SPEC)
    frame = pl.concat([_summaries(0, 10, 0.2, 1.0), _summaries(1, 30, 0.6, 2.0)])
    replace_partition(conn, {"head_summaries": frame}, "org--m", "demo")
    row = conn.execute(
        "SELECT model, to_cls, to_prev, entropy, cls_entropy, uniform_entropy, n_examples, mean_over "
        "FROM clark_entropy "
        "JOIN clark_special_tokens USING (model, model_id, corpus, layer, head, n_examples, mean_over) "
        "JOIN clark_relative_position USING (model, model_id, corpus, layer, head, n_examples, mean_over) "
        "WHERE head = 1"
    ).fetchone()
    model, to_cls, to_prev, entropy, cls_entropy, uniform, n_examples, mean_over = row
    assert model == "org/m" and n_examples == 2 and mean_over == "examples"
    assert to_cls == pytest.approx((0.2 + 0.6) / 2)
    assert entropy == pytest.approx((1.0 + 2.0) / 2)
    assert cls_entropy == pytest.approx(1.5)
    assert uniform == pytest.approx((2.302585 + 3.401197) / 2, rel=1e-6)
    assert to_prev == pytest.approx(1.0)
    assert conn.execute("SELECT count(*) FROM clark_relative_position WHERE mostly_previous").fetchone() == (1,)
    tokens = conn.execute(
        "SELECT to_cls, entropy, cls_entropy, uniform_entropy FROM int_head_attention_means "
        "WHERE head = 1 AND mean_over = 'tokens'"
    ).fetchone()
    assert tokens == pytest.approx(
        ((10 * 0.2 + 30 * 0.6) / 40, (10 * 1.0 + 30 * 2.0) / 40, 1.5, (10 * 2.302585 + 30 * 3.401197) / 40), rel=1e-6
    )


def test_models_keep_the_language_they_stand_for(conn):
    """models.language is written from the spec's language; a spec without one (the CLI's
    `run`) keeps the stored language, and a changed language replaces it."""
    german = dataclasses.replace(SPEC, language="de")
    upsert_model(conn, german)
    (registered_at,) = conn.execute("SELECT registered_at FROM models").fetchone()
    upsert_model(conn, SPEC)  # no language said: the stored one is kept
    assert conn.execute("SELECT model_id, language, registered_at FROM models").fetchall() == [
        ("org--m", "de", registered_at)
    ]
    upsert_model(conn, dataclasses.replace(SPEC, language="ar"))
    assert conn.execute("SELECT language, registered_at FROM stg_models").fetchall() == [("ar", registered_at)]
    assert "language" in schema_columns()["models"]


def test_histogram_views_normalize_by_pairs(conn):
    upsert_model(conn, SPEC)
    frame = pl.concat([_histogram([2.0, 1.0, 1.0], [2, 4, 2]), _histogram([0.0, 0.0, 3.0], [2, 4, 2], head=2)])
    replace_partition(conn, {"position_histograms": frame}, "org--m", "xnli_en")
    rows = partition_rows(conn, "pascual_attention_histograms", "org--m", "xnli_en").sort("head", "offset")
    assert rows["value"].to_list()[:3] == pytest.approx([1.0, 0.25, 0.5])
    assert rows["value_max_normalized"].to_list()[:3] == pytest.approx([1.0, 0.25, 0.5])
    assert rows["value_max_normalized"].to_list()[3:] == pytest.approx([0.0, 0.0, 1.0])
    (center,) = conn.execute("SELECT center_of_mass FROM pascual_center_of_mass").fetchone()
    # head 1: (-1 * 1 + 1 * 0.5) / 1.75; head 2: +1; the layer is their mean.
    assert center == pytest.approx((-0.5 / 1.75 + 1.0) / 2)


def test_replacing_a_partition_never_duplicates(conn):
    frame = _summaries(0, 10, 0.2, 1.0)
    replace_partition(conn, {"head_summaries": frame}, "org--m", "demo")
    replace_partition(conn, {"head_summaries": frame}, "org--m", "demo")
    replace_partition(conn, {"head_summaries": frame}, "org--m", "other")
    counts = conn.execute("SELECT corpus, count(*) FROM head_summaries GROUP BY corpus ORDER BY corpus").fetchall()
    assert counts == [("demo", 2), ("other", 2)]


def test_an_empty_frame_clears_the_partition_of_its_table(conn):
    replace_partition(conn, {"head_summaries": _summaries(0, 10, 0.2, 1.0)}, "org--m", "demo")
    replace_partition(conn, {"head_summaries": _summaries(0, 10, 0.2, 1.0)}, "org--m", "other")
    replace_partition(conn, {"head_summaries": pl.DataFrame()}, "org--m", "demo")
    assert conn.execute("SELECT corpus, count(*) FROM head_summaries GROUP BY corpus").fetchall() == [("other", 2)]


def test_a_failed_write_leaves_the_partition_untouched(conn):
    replace_partition(conn, {"head_summaries": _summaries(0, 10, 0.2, 1.0)}, "org--m", "demo")
    broken = pl.DataFrame({"example_id": [1], "not_a_column": [1.0]})
    with pytest.raises(duckdb.Error):
        replace_partition(
            conn, {"head_summaries": _summaries(5, 12, 0.3, 1.0), "position_histograms": broken}, "org--m", "demo"
        )
    assert conn.execute("SELECT list(DISTINCT example_id) FROM head_summaries").fetchone() == ([0],)


def test_unknown_tables_are_refused(conn):
    with pytest.raises(ValueError, match="not a partitioned warehouse table"):
        replace_partition(conn, {"models": pl.DataFrame({"x": [1]})}, "org--m", "demo")


class _DiskFullConnection:
    """A connection whose INSERTs into `table` fail as DuckDB's do on a full disk."""

    def __init__(self, conn: duckdb.DuckDBPyConnection, table: str):
        self._conn, self._table = conn, table

    def execute(self, query: str, *args):
        if query.startswith(f"INSERT INTO {self._table} ") or query == self._table:
            raise duckdb.IOException('Could not write file "warehouse.duckdb.wal": No space left on device')
        return self._conn.execute(query, *args)

    def __getattr__(self, name: str):
        return getattr(self._conn, name)


def test_a_full_disk_names_the_file_and_the_space_and_rolls_back(tmp_path: Path):
    database = tmp_path / "warehouse.duckdb"
    with duckdb.connect(str(database)) as conn:
        replace_partition(conn, {"head_summaries": _summaries(0, 10, 0.2, 1.0)}, "org--m", "demo")
        histograms = _histogram([0.1] * 3, [1] * 3)
        frames = {"head_summaries": _summaries(5, 12, 0.3, 1.0), "position_histograms": histograms}
        with pytest.raises(WarehouseFullError) as raised:
            replace_partition(_DiskFullConnection(conn, "position_histograms"), frames, "org--m", "demo")
        message = str(raised.value)
        assert f"to the warehouse {database}: the disk is full (" in message
        assert "No space left on device" in message
        rows = sum(frame.to_arrow().nbytes for frame in frames.values())
        log = (tmp_path / "warehouse.duckdb.wal").stat().st_size if (tmp_path / "warehouse.duckdb.wal").exists() else 0
        assert f"take about {rows / 1e6:,.1f} MB (Arrow)" in message
        assert (
            f"holds {log / 1e6:,.1f} MB now" in message
            and f"about {(2 * rows + log) / 1e6:,.1f} MB free in all" in message
        )
        assert "Free space on that disk" in message and "re-run" in message
        assert "\n" not in message
        assert isinstance(raised.value.__cause__, duckdb.IOException)
        # rolled back: the first table's delete and insert are undone, and the connection still works
        assert conn.execute("SELECT list(DISTINCT example_id) FROM head_summaries").fetchone() == ([0],)
        assert conn.execute("SELECT count(*) FROM position_histograms").fetchone() == (0,)
        # once there is space again, the same write goes through
        assert replace_partition(conn, frames, "org--m", "demo") == {"head_summaries": 2, "position_histograms": 3}


def test_the_full_disk_message_counts_the_merge_as_much_again(tmp_path: Path):
    """A million Int64 rows take 8.0 MB; the 3.0 MB log grows to 11.0 MB with them, and merging it
    into the file takes 11.0 MB more: 8.0 + 11.0 = 19.0 MB free in all."""
    database = tmp_path / "warehouse.duckdb"
    Path(f"{database}.wal").write_bytes(bytes(3_000_000))
    frames = {"head_summaries": pl.DataFrame({"example_id": range(1_000_000)}, schema={"example_id": pl.Int64})}
    error = duckdb.IOException('Could not write file "warehouse.duckdb.wal": No space left on device')
    message = str(_write_failure(error, database, frames, "org--m", "demo"))
    assert "take about 8.0 MB (Arrow)" in message and "which holds 3.0 MB now" in message
    assert "merging the log (11.0 MB then) into the file needs that much again: about 19.0 MB free in all" in message


def test_a_write_merges_the_log_into_the_file(tmp_path: Path):
    database = tmp_path / "warehouse.duckdb"
    with duckdb.connect(str(database)) as conn:
        replace_partition(conn, {"head_summaries": _summaries(0, 10, 0.2, 1.0)}, "org--m", "demo")
        wal = tmp_path / "warehouse.duckdb.wal"
        assert not wal.exists() or wal.stat().st_size == 0


def test_a_log_that_cannot_be_merged_fails_the_write_saying_so(tmp_path: Path):
    database = tmp_path / "warehouse.duckdb"
    with duckdb.connect(str(database)) as conn:
        frames = {"head_summaries": _summaries(0, 10, 0.2, 1.0)}
        with pytest.raises(WarehouseFullError) as raised:
            replace_partition(_DiskFullConnection(conn, "CHECKPOINT"), frames, "org--m", "demo")
        message = str(raised.value)
        assert message.startswith(f"partition (org--m, demo) is committed to the write-ahead log of {database}, but")
        assert "the next open of the warehouse merges it" in message and "\n" not in message
        assert conn.execute("SELECT count(*) FROM head_summaries").fetchone() == (2,)  # committed, in the log


def test_neighbour_means_weight_rows_by_all_tokens(conn):
    # to_prev is a mean over all n rows (docs/methods.md §3), so the token-weighted corpus mean weights
    # by n, not n - 1: (10 * 0.9 + 30 * 0.5) / 40 = 0.6 (weighting by n - 1 would give
    # (9 * 0.9 + 29 * 0.5) / 38). The default, the mean of per-example means, is (0.9 + 0.5) / 2.
    upsert_model(conn, SPEC)
    frame = pl.concat([_summaries(0, 10, 0.2, 1.0), _summaries(1, 30, 0.6, 2.0)]).with_columns(
        to_prev=pl.Series([0.9, 0.0, 0.5, 0.0])
    )
    replace_partition(conn, {"head_summaries": frame}, "org--m", "demo")
    to_prev = conn.execute(
        "SELECT to_prev FROM int_head_attention_means WHERE head = 1 AND mean_over = 'tokens'"
    ).fetchone()[0]
    assert to_prev == pytest.approx(0.6)
    to_prev = conn.execute("SELECT to_prev FROM clark_relative_position WHERE head = 1").fetchone()[0]
    assert to_prev == pytest.approx(0.7)


# the batches of fact tables (each write adds one of every aggregate table reading them too)
FACT_BATCHES = "SELECT count(*) FROM batches WHERE NOT starts_with(table_name, 'agg_')"


def test_rows_from_before_batches_are_carried_as_one_batch(conn):
    # a warehouse written before batches: rows without a batch_id and no `batches` rows
    conn.execute(
        "INSERT INTO head_summaries (model_id, corpus, example_id, layer, head, n_tokens, to_cls) "
        "VALUES ('org--m', 'demo', 0, 1, 1, 4, 0.25), ('org--m', 'demo', 1, 1, 1, 4, 0.75)"
    )
    upsert_model(conn, SPEC)
    assert conn.execute("SELECT count(*) FROM stg_head_summaries").fetchone() == (0,)
    apply_views(conn)
    assert conn.execute("SELECT list(to_cls ORDER BY example_id) FROM stg_head_summaries").fetchone() == ([0.25, 0.75],)
    assert conn.execute(
        "SELECT table_name, batch_id, n_rows FROM batches WHERE table_name = 'head_summaries'"
    ).fetchall() == [("head_summaries", "carried", 2)]
    # the same apply_views computed the aggregates of the carried rows
    assert conn.execute("SELECT to_cls FROM clark_special_tokens").fetchone() == (pytest.approx(0.5),)
    # the next write replaces the carried batch like any other
    replace_partition(conn, {"head_summaries": _summaries(5, 10, 0.5, 1.0)}, "org--m", "demo")
    assert conn.execute("SELECT list(DISTINCT example_id) FROM stg_head_summaries").fetchone() == ([5],)
    assert conn.execute(FACT_BATCHES).fetchone() == (1,)


def test_the_duckdb_file_keeps_one_batch_per_partition(conn):
    for _ in range(3):
        replace_partition(conn, {"head_summaries": _summaries(0, 10, 0.2, 1.0)}, "org--m", "demo")
    assert conn.execute("SELECT count(*), count(DISTINCT batch_id) FROM head_summaries").fetchone() == (2, 1)
    assert conn.execute(FACT_BATCHES).fetchone() == (1,)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"ATTN_WAREHOUSE_BACKEND": "postgres"}, "ATTN_WAREHOUSE_BACKEND='postgres' is not a warehouse backend"),
        ({"ATTN_WAREHOUSE_BACKEND": "ducklake"}, "ducklake needs ATTN_LAKE_CATALOG and ATTN_LAKE_DATA_PATH"),
    ],
)
def test_bad_backend_settings_say_what_to_set(env: dict, message: str):
    with pytest.raises(LakeConfigError, match=re.escape(message)):
        WarehouseConfig.from_env(env)


def test_the_default_backend_is_the_duckdb_file():
    config = WarehouseConfig.from_env({})
    assert (config.backend, config.lake, config.database) == ("duckdb", None, str(settings.warehouse_path()))


def test_staging_views_come_from_templates_unless_a_table_has_a_file_of_its_own():
    staging = {view.name: view for view in view_definitions() if view.layer == "staging"}
    templates = sql_files.SQL_DIR / "staging" / "templates"
    assert staging["stg_examples"].source == templates / "plain.sql"
    assert "FROM examples AS t" in staging["stg_examples"].sql and "{" not in staging["stg_examples"].sql
    histograms = {name: staging[f"stg_{name}"] for name in ("position_histograms", "contribution_histograms")}
    assert {view.source for view in histograms.values()} == {templates / "histograms.sql"}
    assert "'attention' AS kind" in histograms["position_histograms"].sql
    assert "'contribution' AS kind" in histograms["contribution_histograms"].sql
    assert staging["stg_head_example_maps"].source == sql_files.SQL_DIR / "staging" / "stg_head_example_maps.sql"
    # relation_hits' two views from one template: the attention rows, and every weighting's
    relation_hits = staging["stg_relation_hits"], staging["stg_weighted_relation_hits"]
    assert {view.source for view in relation_hits} == {templates / "relation_hits.sql"}
    assert [view.sql.count("t.weighting = 'attention'") for view in relation_hits] == [1, 0]
    assert all("unnest(t.target_words)" in view.sql and "{" not in view.sql for view in relation_hits)


def test_an_unfinished_reproduction_labels_no_rows_yet_makes_the_next_paper_one_recompute(conn) -> None:
    """A plain run's rows, then `reproduce --quick` stopped midway: no row is labelled quick
    (stg_reproductions, which the scorecard and the report read: `run`), yet the next paper
    reproduction knows a quick one wrote some (reproduction_profile). A finished reproduction's label
    stays until another one finishes."""
    upsert_model(conn, SPEC)

    def labels() -> list[tuple[str, str]]:
        return conn.execute("SELECT model_id, profile FROM stg_reproductions").fetchall()

    record_reproduction(conn, SPEC.model_id, "quick", finished=False)
    assert labels() == [] and reproduction_profile(conn, SPEC.model_id) == "quick"
    record_reproduction(conn, SPEC.model_id, "quick")
    assert labels() == [("org--m", "quick")]
    record_reproduction(conn, SPEC.model_id, "paper")
    record_reproduction(conn, SPEC.model_id, "quick", finished=False)
    record_reproduction(conn, SPEC.model_id, "quick", finished=False)  # started again: still one such row
    assert labels() == [("org--m", "paper")] and reproduction_profile(conn, SPEC.model_id) == "quick"
    assert conn.execute("SELECT profile, finished FROM reproductions ORDER BY ALL").fetchall() == [
        ("paper", True),
        ("quick", False),
    ]
