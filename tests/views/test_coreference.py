"""Clark §4.3 views on hand-built tables (the document of test_coreference_baselines), and the
per-corpus coreference baselines assets writing the predictions the views judge, and Table 2
drawn for every coreference corpus with rows."""

import logging
from datetime import datetime
from pathlib import Path

import duckdb
import polars as pl
import pytest
from dagster import DagsterInstance, materialize
from dagster_duckdb import DuckDBResource

from dagster_project.defs.assets.clark.coreference import coreference_baselines_by_corpus
from dagster_project.presentation.chart_registry import CHARTS
from dagster_project.presentation.charts import clark as charts
from dagster_project.storage.batches import partition_rows
from dagster_project.storage.partition_writes import replace_partition
from dagster_project.storage.views import apply_views
from tests.unit.test_coreference_baselines import EXPECTED, document_frames

MODEL, CORPUS = "tiny", "ontogum"
# Coreferent mentions: 3 (pronoun), 4 and 8 (nominal), 5 and 7 (proper). Each head's most
# attended word from each mention's head word; antecedent head words: 3 -> {4}, 4 -> {4, 9},
# 5 -> {6}, 7 -> {0}, 8 -> {4, 9, 13}.
TARGETS = {
    (1, 1): {9: 4, 13: 9, 16: 6, 21: 19, 26: 25},  # right: 3, 4, 5 -> 3/5
    (1, 2): {9: 6, 13: 4, 16: 6, 21: 0, 26: 13},  # right: 4, 5, 7, 8 -> 4/5 (best)
    (2, 1): {9: 0, 13: 0, 16: 0, 21: 0, 26: 0},  # right: 7 -> 1/5
}


def _hits(without_word: int | None = None) -> pl.DataFrame:
    rows = [
        (7, word, layer, head, target)
        for (layer, head), picks in TARGETS.items()
        for word, target in picks.items()
        if word != without_word
    ]
    rows.append((7, 1, 1, 1, 0))  # a word heading no mention: ignored
    return pl.DataFrame(
        rows,
        schema={
            "example_id": pl.Int32,
            "word_index": pl.Int32,
            "layer": pl.Int16,
            "head": pl.Int16,
            "target_word": pl.Int32,
        },
        orient="row",
    ).with_columns(word_mode=pl.lit("mean"))


def _predictions() -> pl.DataFrame:
    rows = [
        (7, mention, system, antecedent) for system, picks in EXPECTED.items() for mention, antecedent in picks.items()
    ]
    return pl.DataFrame(
        rows,
        schema={"example_id": pl.Int32, "mention_id": pl.Int32, "system": pl.String, "antecedent_id": pl.Int32},
        orient="row",
    )


def _fill(
    conn: duckdb.DuckDBPyConnection,
    predictions: bool = True,
    corpora: tuple[str, ...] = (CORPUS,),
    pos: bool = True,
    unhit_word: int | None = None,
) -> None:
    mentions, words = document_frames()
    if not pos:  # a corpus without a POS column: every type from the word rules came out nominal
        mentions = mentions.with_columns(mention_type=pl.lit("nominal"), head_xpos=pl.lit(None, dtype=pl.String))
    conn.execute(
        "INSERT INTO models VALUES (?, 'org/tiny-bert', '/tmp/tiny', NULL, 'bert', 2, 4, TRUE, ?, NULL)",
        [MODEL, datetime(2026, 1, 1)],
    )
    words = words.with_columns(segment=pl.lit(0, dtype=pl.Int8), char_start=0, char_end=0)
    tables = {"coref_mentions": mentions, "words": words, "relation_hits": _hits(unhit_word)}
    if predictions:
        tables["coref_baseline_predictions"] = _predictions()
    for corpus in corpora:
        replace_partition(conn, tables, MODEL, corpus)


def _accuracies(conn: duckdb.DuckDBPyConnection, view: str, key: str) -> dict[tuple, tuple[float, int]]:
    rows = conn.execute(f"SELECT {key}, mention_type, accuracy, n FROM {view}").fetchall()
    return {tuple(row[:-2]): (round(row[-2], 6), row[-1]) for row in rows}


def test_antecedents_are_earlier_same_cluster_mentions(conn: duckdb.DuckDBPyConnection):
    _fill(conn)
    pairs = conn.execute(
        "SELECT mention_id, antecedent_id, antecedent_head_word FROM int_coref_antecedents ORDER BY ALL"
    ).fetchall()
    assert pairs == [(3, 1, 4), (4, 1, 4), (4, 3, 9), (5, 2, 6), (7, 0, 0), (8, 1, 4), (8, 3, 9), (8, 4, 13)]


def test_head_accuracy_per_mention_type(conn: duckdb.DuckDBPyConnection):
    _fill(conn)
    accuracy = _accuracies(conn, "int_coref_head_accuracy", "layer, head")
    assert accuracy[(1, 1, "all")] == (0.6, 5)
    assert accuracy[(1, 1, "pronoun")] == (1.0, 1)
    assert accuracy[(1, 1, "nominal")] == (0.5, 2)
    assert accuracy[(1, 1, "proper")] == (0.5, 2)
    assert accuracy[(1, 2, "all")] == (0.8, 5)
    assert accuracy[(2, 1, "all")] == (0.2, 5)
    assert accuracy[(2, 1, "proper")] == (0.5, 2)
    assert len(accuracy) == 3 * 4


def test_clark_coreference_heads_has_best_head_and_baselines(conn: duckdb.DuckDBPyConnection):
    _fill(conn)
    rows = conn.execute(
        "SELECT model, corpus, system, mention_type, accuracy, n, layer, head FROM clark_coreference_heads"
    ).fetchall()
    assert {row[:2] for row in rows} == {("org/tiny-bert", CORPUS)}
    table = {(system, mention_type): (round(accuracy, 6), n) for _, _, system, mention_type, accuracy, n, _, _ in rows}
    assert table == {
        ("nearest", "all"): (0.2, 5),
        ("nearest", "pronoun"): (0.0, 1),
        ("nearest", "proper"): (0.0, 2),
        ("nearest", "nominal"): (0.5, 2),
        ("head match", "all"): (0.6, 5),
        ("head match", "pronoun"): (0.0, 1),
        ("head match", "proper"): (1.0, 2),
        ("head match", "nominal"): (0.5, 2),
        ("rule-based", "all"): (1.0, 5),
        ("rule-based", "pronoun"): (1.0, 1),
        ("rule-based", "proper"): (1.0, 2),
        ("rule-based", "nominal"): (1.0, 2),
        ("head 1-2", "all"): (0.8, 5),
        ("head 1-2", "pronoun"): (0.0, 1),
        ("head 1-2", "proper"): (1.0, 2),
        ("head 1-2", "nominal"): (1.0, 2),
    }
    assert [row[2] for row in rows[::4]] == ["nearest", "head match", "rule-based", "head 1-2"]
    assert {row[6:] for row in rows if row[2] == "head 1-2"} == {(1, 2)}


def test_heads_and_baselines_are_judged_on_the_same_mentions(conn: duckdb.DuckDBPyConnection):
    # mention 8's head word (26) has no relation hits (no pieces): no head can be judged on it,
    # so the baselines leave it out too
    _fill(conn, unhit_word=26)
    table = _accuracies(conn, "clark_coreference_heads", "system")
    # of mentions 3, 4, 5, 7: nearest gets 4 (its pick 3 is an antecedent); head match 4, 5, 7; rule-based all
    assert table[("nearest", "all")] == (0.25, 4)
    assert table[("head match", "all")] == (0.75, 4)
    assert table[("rule-based", "all")] == (1.0, 4)
    assert table[("nearest", "nominal")] == (1.0, 1)
    # 1-1 (3, 4, 5 right) and 1-2 (4, 5, 7) tie at 3/4; the lower layer-head ranks first
    assert table[("head 1-1", "all")] == (0.75, 4)
    heads = _accuracies(conn, "int_coref_head_accuracy", "layer, head")
    assert {n for _, n in (heads[(layer, head, "all")] for layer, head in TARGETS)} == {4}


@pytest.fixture
def warehouse_file(tmp_path: Path) -> Path:
    path = tmp_path / "warehouse.duckdb"
    with duckdb.connect(str(path)) as conn:
        apply_views(conn)
        _fill(conn, predictions=False)
    return path


def _materialize_baselines(warehouse: Path, corpus: str = CORPUS, instance: DagsterInstance | None = None):
    instance = instance or DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("models", [MODEL])
    resources = {"warehouse": DuckDBResource(database=str(warehouse))}
    asset = coreference_baselines_by_corpus[corpus]
    return materialize([asset], partition_key=MODEL, instance=instance, resources=resources)


def test_asset_writes_predictions_the_views_judge(warehouse_file: Path):
    for _ in range(2):  # a second run replaces the partition's rows
        result = _materialize_baselines(warehouse_file)
        assert result.success
    with duckdb.connect(str(warehouse_file), read_only=True) as conn:
        # nearest and rule-based for the 8 mentions with a candidate, head match for the 5 with a
        # same-head one
        assert conn.execute("SELECT count(*) FROM coref_baseline_predictions").fetchone()[0] == 8 + 8 + 5
        accuracy = _accuracies(conn, "int_coref_baseline_accuracy", "system")
    assert accuracy[("nearest", "all")] == (0.2, 5)
    assert accuracy[("rule-based", "all")] == (1.0, 5)
    # 3 "they" has no same-head candidate and counts wrong; 8 picks 6 of another cluster
    assert accuracy[("head match", "all")] == (0.6, 5)
    metadata = result.asset_materializations_for_node("ontogum_coreference_baselines")[0].metadata
    assert metadata["mention_type_source"].value.startswith("POS column")
    assert [metadata[f"{kind}_mentions"].value for kind in ("pronoun", "proper", "nominal")] == [1, 4, 4]


def test_every_coreference_corpus_has_its_baselines_and_table2_panel(tmp_path: Path):
    path = tmp_path / "warehouse.duckdb"
    with duckdb.connect(str(path)) as conn:
        apply_views(conn)
        _fill(conn, predictions=False, corpora=("ontogum", "conll2012"))
    assert {"ontogum", "conll2012", "gap_development", "gap_validation", "gap_test"} == set(
        coreference_baselines_by_corpus
    )
    assert _materialize_baselines(path, "ontogum").success and _materialize_baselines(path, "conll2012").success
    table2 = next(spec for spec in CHARTS if spec.name == "clark_table2_coreference")
    with duckdb.connect(str(path), read_only=True) as conn:
        corpus, rows = table2.rows(conn, MODEL)
    assert corpus == "ontogum, conll2012" and rows["corpus"].unique(maintain_order=True).to_list() == [
        "ontogum",
        "conll2012",
    ]
    chart = table2.draw(rows, table2.title(rows, corpus)).to_dict()
    assert chart["facet"]["column"]["field"] == "corpus"


def test_a_corpus_without_pronouns_or_proper_mentions_gets_a_warning(tmp_path: Path):
    path = tmp_path / "warehouse.duckdb"
    with duckdb.connect(str(path)) as conn:
        apply_views(conn)
        _fill(conn, predictions=False, corpora=("conll2012",), pos=False)
    instance = DagsterInstance.ephemeral()
    result = _materialize_baselines(path, "conll2012", instance)
    metadata = result.asset_materializations_for_node("conll2012_coreference_baselines")[0].metadata
    assert metadata["mention_type_source"].value.startswith("the head word")
    warnings = [entry.user_message for entry in instance.all_logs(result.run_id) if entry.level == logging.WARNING]
    assert any("conll2012: 0 pronoun and 0 proper mentions of 9" in message for message in warnings), warnings


def test_asset_without_mentions_says_what_to_materialize(warehouse_file: Path):
    with pytest.raises(ValueError, match="materialize conll2012_examples first"):
        _materialize_baselines(warehouse_file, "conll2012")


def test_chart_groups_systems_in_the_view_order(conn: duckdb.DuckDBPyConnection):
    _fill(conn)
    rows = partition_rows(conn, "clark_coreference_heads", MODEL, CORPUS)
    spec = charts.clark_coreference_chart(rows, "tiny").to_dict()
    assert spec["spec"]["encoding"]["xOffset"]["sort"] == ["nearest", "head match", "rule-based", "head 1-2"]
    assert len(spec["datasets"][next(iter(spec["datasets"]))]) == 16
