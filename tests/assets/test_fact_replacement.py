"""A fact pass replaces every table it owns (defs/assets/facts.py owned_tables), those it wrote
nothing to included, in its one write: a pass with the norm weighting and then a default pass
leave no value_norms rows behind, so no chart draws the older pass's norms beside the new rows."""

from pathlib import Path

import pytest
from dagster import AssetKey, DagsterInstance, instance_for_test

from dagster_project.compute.fact_kinds import FACT_KINDS
from dagster_project.defs.assets.facts import owned_tables
from dagster_project.defs.registration import register_model
from dagster_project.storage.view_contracts import check_contracts
from tests.runs import materialize_model

FACTS = AssetKey("demo_attention_facts")


@pytest.fixture
def instance() -> DagsterInstance:
    with instance_for_test() as test_instance:
        yield test_instance


def weightings(names: list[str]) -> dict:
    return {"ops": {"demo_attention_facts": {"config": {"weightings": names}}}}


def test_value_norms_are_owned_by_every_pass() -> None:
    assert owned_tables([FACT_KINDS["relation_hits"]]) == ["head_summaries", "relation_hits", "value_norms"]


def test_a_default_pass_after_a_norm_pass_clears_the_norms(
    instance: DagsterInstance, resources: dict, tiny_model_dir: Path
) -> None:
    model_id = register_model(str(tiny_model_dir), instance, resources["warehouse"]).model_id
    materialize_model(
        [AssetKey("warehouse_views"), AssetKey("encoder_model"), AssetKey("demo_examples")],
        model_id,
        instance,
        resources,
    )

    def rows(conn, table: str) -> dict[str, int]:
        return dict(
            conn.execute(f"SELECT weighting, count(*) FROM {table} WHERE corpus = 'demo' GROUP BY ALL").fetchall()
        )

    materialize_model([FACTS], model_id, instance, resources, weightings(["attention", "norm"]))
    with resources["warehouse"].get_connection() as conn:
        assert set(rows(conn, "stg_weighted_head_summaries")) == {"attention", "norm"}
        norms = conn.execute("SELECT count(*) FROM stg_value_norms WHERE corpus = 'demo'").fetchone()[0]
        assert norms > 0
        assert check_contracts(conn) == {}  # the norm weighting's value norms and masses keep their contracts

    materialize_model([FACTS], model_id, instance, resources)
    with resources["warehouse"].get_connection() as conn:
        assert set(rows(conn, "stg_weighted_head_summaries")) == {"attention"}
        assert conn.execute("SELECT count(*) FROM value_norms").fetchone()[0] == 0
        # one batch wrote both: the summaries and the (empty) norms
        batches = conn.execute(
            "SELECT table_name, n_rows, batch_id FROM stg_batches WHERE corpus = 'demo' "
            "AND table_name IN ('head_summaries', 'value_norms')"
        ).fetchall()
    assert len({batch for _, _, batch in batches}) == 1
    assert {table: n for table, n, _ in batches}["value_norms"] == 0
