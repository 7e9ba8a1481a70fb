"""int_facts_of_replaced_examples: the (model, corpus) pairs whose facts were computed from examples
the warehouse no longer holds (a run sampled anew and its facts step failed), with the run that
fixes each; and the lines and note that `sql`, `scorecard` and the report make of it."""

import duckdb
import polars as pl

from dagster_project.compute.models import ModelSpec
from dagster_project.presentation.consistency import (
    facts_of_replaced_examples,
    replaced_examples_html,
    replaced_examples_lines,
)
from dagster_project.presentation.report import index_page
from dagster_project.presentation.report_data import ReportData
from dagster_project.storage.model_rows import upsert_model
from dagster_project.storage.partition_writes import replace_partition

SPEC = ModelSpec("org--m", "org/m", "/x", "r1", "bert", 1, 1, True)
LOCAL = ModelSpec("local--m", "/models/my model's", "/models/my model's", "r1", "bert", 1, 1, True)


def examples(n: int) -> dict[str, pl.DataFrame]:
    return {"examples": pl.DataFrame({"example_id": range(n), "text_a": "a b", "n_tokens": 4, "max_len": 8, "seed": 0})}


def facts(n: int) -> dict[str, pl.DataFrame]:
    return {"head_summaries": pl.DataFrame({"example_id": range(n), "layer": 0, "head": 0, "n_tokens": 4})}


def test_facts_of_replaced_examples_are_listed_with_their_fix(conn: duckdb.DuckDBPyConnection) -> None:
    upsert_model(conn, SPEC)
    upsert_model(conn, LOCAL)
    # demo: facts of the examples of their run, then examples sampled anew whose facts never came
    replace_partition(conn, examples(12), "org--m", "demo", "ex-12")
    replace_partition(conn, facts(12), "org--m", "demo", "facts-12", {"demo": "ex-12"})
    assert facts_of_replaced_examples(conn).is_empty()
    replace_partition(conn, examples(16), "org--m", "demo", "ex-16")
    # xnli_en: facts that record no examples batch (written before the column), older than the examples
    replace_partition(conn, facts(3), "org--m", "xnli_en", "old-facts")
    replace_partition(conn, examples(3), "org--m", "xnli_en", "ex-3")
    # wiki_segments: such facts written after their examples hold; glue_rte has examples and no facts
    replace_partition(conn, examples(2), "org--m", "wiki_segments", "ex-2")
    replace_partition(conn, facts(2), "org--m", "wiki_segments", "old-facts-2")
    replace_partition(conn, examples(2), "org--m", "glue_rte", "ex-rte")
    # a local model whose path a shell must have quoted
    replace_partition(conn, examples(2), "local--m", "demo", "local-ex-1")
    replace_partition(conn, facts(2), "local--m", "demo", "local-facts", {"demo": "local-ex-1"})
    replace_partition(conn, examples(2), "local--m", "demo", "local-ex-2")

    rows = facts_of_replaced_examples(conn)
    assert rows.select("model_id", "corpus", "examples_batch_id", "facts_examples_batch_id", "fix").rows() == [
        ("local--m", "demo", "local-ex-2", "local-ex-1", "attn-warehouse run '/models/my model'\"'\"'s' --corpus demo"),
        ("org--m", "demo", "ex-16", "ex-12", "attn-warehouse run org/m --corpus demo"),
        ("org--m", "xnli_en", "ex-3", None, "attn-warehouse run org/m --corpus xnli_en"),
    ]
    assert facts_of_replaced_examples(conn, "xnli_en")["model_id"].to_list() == ["org--m"]

    # the run that fixes a pair writes facts of its current examples
    replace_partition(conn, facts(16), "org--m", "demo", "facts-16", {"demo": "ex-16"})
    assert facts_of_replaced_examples(conn, "demo")["model_id"].to_list() == ["local--m"]


def test_the_lines_and_the_note_name_the_pair_and_the_fix() -> None:
    rows = pl.DataFrame(
        {
            "model_id": ["org--m"],
            "model": ["org/m"],
            "corpus": ["demo"],
            "fix": ["attn-warehouse run org/m --corpus demo"],
        }
    )
    assert replaced_examples_lines(rows) == [
        "warning: the demo facts of org/m were computed from examples the warehouse no longer holds (a later run "
        "sampled them anew and its facts step failed or has not run): the views mix the two; "
        "`attn-warehouse run org/m --corpus demo` writes facts of the current examples"
    ]
    note = replaced_examples_html(rows)
    assert "the demo facts of org/m were computed from examples" in note
    assert "run <code>attn-warehouse run org/m --corpus demo</code>" in note
    assert replaced_examples_html(rows.clear()) == ""
    # the report's first page opens on it
    models = pl.DataFrame({"model_id": ["org--m"], "source": ["org/m"]})
    assert note in index_page({}, ReportData(models, {}, replaced_examples=rows))


def test_a_warehouse_without_the_view_lists_nothing() -> None:
    with duckdb.connect() as conn:
        assert facts_of_replaced_examples(conn).is_empty()
