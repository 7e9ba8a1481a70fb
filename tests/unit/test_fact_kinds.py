"""The fact-kind registry: every kind has its table's schema and staging view, every corpus's
kinds are known and get what they need, and a corpus asking for more is refused by name."""

from dataclasses import replace

import pytest

from dagster_project.compute.fact_kinds import ALWAYS, FACT_KINDS, corpus_fact_kinds
from dagster_project.corpora import CORPORA
from dagster_project.settings import SQL_DIR
from dagster_project.storage.schema import PARTITIONED_TABLES
from dagster_project.storage.sql_files import view_definitions


@pytest.mark.parametrize("table", sorted(FACT_KINDS))
def test_every_kind_has_a_partitioned_table_and_a_staging_view(table: str) -> None:
    assert (SQL_DIR / "schema" / f"{table}.sql").is_file()
    # its own file in sql/staging, or the view made from a template there for a plain table
    assert f"stg_{table}" in {view.name for view in view_definitions() if view.layer == "staging"}
    assert table in PARTITIONED_TABLES


def test_every_corpus_analysed_for_attention_gets_valid_kinds() -> None:
    analysed = {name: corpus_fact_kinds(spec) for name, spec in CORPORA.items() if spec.attention}
    assert all(kinds[0].table == ALWAYS[0] for kinds in analysed.values())
    tables = {name: {kind.table for kind in kinds} for name, kinds in analysed.items()}
    assert tables["wiki_segments"] == {"head_summaries", "position_histograms", "head_distances", "head_example_maps"}
    assert tables["ud_ewt_test"] == {"head_summaries", "relation_hits", "head_example_maps"}
    assert tables["ud_ewt_dev"] == {"head_summaries", "relation_hits"}
    assert "head_example_maps" in tables["ontogum"] and "head_example_maps" not in tables["demo"]
    assert tables["framenet"] == {"head_summaries", "relation_hits", "frame_link_attention"}
    assert "feature_pair_attention" in tables["glue_rte"] and "position_histograms" not in tables["glue_rte"]
    assert not CORPORA["glue_rte_train"].attention


def test_a_kind_needing_what_the_corpus_lacks_is_refused_by_name() -> None:
    no_features = replace(CORPORA["ud_ewt_test"], fact_kinds=("feature_pair_attention",))
    with pytest.raises(ValueError, match=r"'ud_ewt_test'.*'feature_pair_attention'.*word_features"):
        corpus_fact_kinds(no_features)
    with pytest.raises(ValueError, match="unknown fact kinds"):
        corpus_fact_kinds(replace(CORPORA["demo"], fact_kinds=("head_sumaries",)))
