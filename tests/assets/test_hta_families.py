"""The HTA asset on every encoder family's tiny random model (tests/tiny_models.FAMILIES): the run's
estimator check, both contributions written, and the previous-layer method and cost in its metadata
(closed form everywhere but DeBERTa, whose exact per-layer jvp fallback takes L * n * D jvps)."""

from pathlib import Path

import duckdb
import pytest
from dagster import DagsterInstance

from dagster_project.compute.weightings import AGGREGATIONS, WEIGHTINGS
from dagster_project.defs.assets import corpus_assets_by_name, encoder_model, hta_assets_by_corpus
from dagster_project.defs.registration import register_model
from tests.runs import materialize_model
from tests.tiny_models import FAMILIES, TINY_HEADS, TINY_LAYERS, tiny_family

EXAMPLES = 2


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_hta_asset_runs_on_every_family(name: str, tmp_path: Path, resources: dict):
    instance = DagsterInstance.ephemeral()
    model_id = register_model(str(tiny_family(name, tmp_path / name)), instance, resources["warehouse"]).model_id
    # D = 32 orthonormal probes per token span the tiny model's whole space: the check's estimate is exact
    # (one check example: exact HTA there is most of the test's time).
    config = {"hta_method": "estimate(32)", "max_examples": EXAMPLES, "check_examples": 1}
    result = materialize_model(
        [encoder_model, corpus_assets_by_name["demo"], hta_assets_by_corpus["demo"]],
        model_id,
        instance,
        resources,
        {"ops": {"demo_hta_facts": {"config": config}}},
    )
    checks = {check.check_name: check for check in result.get_asset_check_evaluations()}
    assert all(check.passed for check in checks.values())
    assert checks["estimate_matches_exact"].metadata["worst_layer_pearson"].value == pytest.approx(1.0, abs=1e-5)
    [materialization] = result.asset_materializations_for_node("demo_hta_facts")
    metadata = {key: value.value for key, value in materialization.metadata.items()}
    with duckdb.connect(resources["warehouse"].database, read_only=True) as conn:
        lengths = [n for (n,) in conn.execute("SELECT n_tokens FROM examples ORDER BY example_id").fetchall()]
        rows = conn.execute("SELECT kind, count(*) FROM hta_correlations GROUP BY kind ORDER BY kind").fetchall()
        agreement = conn.execute("SELECT count(*), count(spearman) FROM hta_agreement").fetchone()
    assert rows == [(kind, EXAMPLES * TINY_LAYERS * TINY_HEADS) for kind in ("input", "previous_layer")]
    assert agreement == (EXAMPLES * TINY_LAYERS * len(WEIGHTINGS) * len(AGGREGATIONS),) * 2
    fallback = name == "deberta-v2"
    assert metadata["previous_layer_method"] == ("per-layer jvp (exact)" if fallback else "closed form")
    assert metadata["previous_layer_jvps"] == (TINY_LAYERS * sum(lengths[:EXAMPLES]) * 32 if fallback else 0)
