"""In-process materialization of every per-model asset with a tiny random-weight BERT."""

from pathlib import Path

import duckdb
import pytest
from dagster import AssetSelection, DagsterInstance, materialize

from dagster_project.compute.models import ModelLoadError
from dagster_project.compute.weightings import AGGREGATIONS, WEIGHTINGS
from dagster_project.defs.assets import (
    all_assets,
    chart_assets,
    corpus_assets_by_name,
    encoder_model,
    fact_assets_by_corpus,
    hta_assets_by_corpus,
    warehouse_views,
)
from dagster_project.defs.registration import register_model
from dagster_project.presentation.chart_registry import CHARTS
from tests.runs import materialize_model
from tests.tiny_models import TINY_HEADS, TINY_LAYERS


def _run_demo(instance: DagsterInstance, resources: dict, model_id: str, charts: bool = True) -> None:
    assets = [
        encoder_model,
        corpus_assets_by_name["demo"],
        fact_assets_by_corpus["demo"],
        hta_assets_by_corpus["demo"],
        *(chart_assets if charts else []),
    ]
    assert materialize([warehouse_views], instance=instance, resources=resources).success
    # D = 32 orthonormal probes per token span the tiny model's whole space: the estimate is exact.
    hta_config = {"ops": {"demo_hta_facts": {"config": {"hta_method": "estimate(32)"}}}}
    result = materialize_model(assets, model_id, instance, resources, hta_config)
    checks = {check.check_name: check for check in result.get_asset_check_evaluations()}
    assert set(checks) == {
        "rows_sum_to_one",
        "histogram_pairs_and_mass",
        "finite_values",
        "rows_per_example",
        "contributions_sum_to_one",
        "estimate_matches_exact",
        "received_sums_to_one",
        "tokens_match_examples",
        "word_pieces_inside_example",
    }
    assert all(check.passed for check in checks.values())
    assert checks["estimate_matches_exact"].metadata["worst_layer_pearson"].value == pytest.approx(1.0, abs=1e-5)


def test_demo_pipeline_end_to_end(tiny_model_dir: Path, resources: dict, tmp_path: Path, models_cache: Path):
    instance = DagsterInstance.ephemeral()
    spec = register_model(str(tiny_model_dir), instance, resources["warehouse"])
    assert instance.get_dynamic_partitions("models") == [spec.model_id]
    _run_demo(instance, resources, spec.model_id)
    _run_demo(instance, resources, spec.model_id, charts=False)  # a second run must not duplicate rows

    # An estimator below the run's threshold on an estimated layer, without the fallback to exact
    # HTA, stops the run before it writes.
    failed = _run_hta(instance, resources, spec.model_id, {"hta_method": "estimate(1)", "fallback_to_exact": False})
    assert not failed.success
    [failure] = [event for event in failed.all_events if event.is_step_failure]
    message = str(failure.event_specific_data.error)
    assert "estimate(1) misses exact HTA on 16 examples: layer 2 has Pearson" in message
    assert "published quantities out of tolerance: " in message and "histogram_mass layer 2" in message
    # The failed run keeps the contributions its check computed (16 examples, exact and estimated),
    # for the next run to resume from; a run that writes its facts removes what it saved.
    [saved] = [*(models_cache / "hta_state").iterdir()]
    assert len([*saved.glob("*.pt")]) == 2 * 16

    conn = duckdb.connect(str(tmp_path / "warehouse.duckdb"), read_only=True)
    count = lambda table: conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]  # noqa: E731
    assert count("models") == 1
    assert count("examples") == 24
    assert count("head_summaries") == 24 * TINY_LAYERS * TINY_HEADS
    assert count("hta_correlations") == 2 * 24 * TINY_LAYERS * TINY_HEADS  # previous-layer and input
    assert conn.execute("SELECT DISTINCT hta_method FROM hta_correlations").fetchall() == [("estimate(32)",)]
    # the agreement of every weighting with the input contribution, per example, layer and aggregation (the
    # layer's own map, the maps rolled out), from the same pass
    rows = 24 * TINY_LAYERS * len(WEIGHTINGS) * len(AGGREGATIONS)
    assert conn.execute(
        "SELECT count(*), count(DISTINCT weighting), count(DISTINCT aggregation), count(spearman), "
        "bool_and(spearman BETWEEN -1 AND 1) FROM hta_agreement"
    ).fetchone() == (rows, len(WEIGHTINGS), len(AGGREGATIONS), rows, True)
    # every correlation row carries the query rows it averages, the weight of its mean in the corpus
    # mean: here all of its example's (no row of the random model is constant)
    assert conn.execute(
        "SELECT count(*) FROM hta_correlations AS c JOIN (SELECT example_id, count(*) AS n FROM tokens GROUP BY ALL) "
        "USING (example_id) WHERE c.n_rows IS DISTINCT FROM n"
    ).fetchone() == (0,)
    # Kovaleva facts of the same pass: a pattern per head map, received attention per token.
    assert conn.execute("SELECT count(pattern) FROM head_summaries").fetchone() == (24 * TINY_LAYERS * TINY_HEADS,)
    assert count("received_attention") == count("tokens") * TINY_LAYERS * TINY_HEADS
    assert conn.execute(
        "SELECT max(n) <= 3 FROM (SELECT count(DISTINCT example_id) AS n FROM pattern_example_maps GROUP BY pattern)"
    ).fetchone() == (True,)
    assert conn.execute("SELECT round(sum(share), 6) FROM kovaleva_pattern_shares").fetchone() == (1.0,)
    # One example's full maps per pattern class found: n^2 cells per head, rows summing to 1.
    maps = conn.execute(
        "SELECT pattern, count(*), any_value(n_tokens), max(abs(row_sum - 1)) "
        "FROM (SELECT pattern, example_id, layer, head, query, "
        "sum(input) AS row_sum, count(*) AS cells FROM hta_example_maps GROUP BY ALL) JOIN examples USING (example_id) "
        "GROUP BY pattern"
    ).fetchall()
    assert maps and all(rows == n * TINY_LAYERS * TINY_HEADS and error < 1e-5 for _, rows, n, error in maps)
    pairs = conn.execute(
        "SELECT bool_and(pairs = n * n) FROM (SELECT sum(pair_count) AS pairs, any_value(e.n_tokens) AS n "
        "FROM stg_position_histograms p JOIN examples e USING (model_id, corpus, example_id) "
        "WHERE scope = 'all' GROUP BY example_id, layer, head)"
    ).fetchone()
    assert pairs == (True,)
    assert conn.execute("SELECT count(DISTINCT (layer, head)) FROM clark_entropy").fetchone() == (
        TINY_LAYERS * TINY_HEADS,
    )
    # Every demo word has pieces and a spaCy annotation; tokens point back at their word.
    assert conn.execute("SELECT count(*), count(piece_start) FROM words").fetchone() == (count("word_features"),) * 2
    assert conn.execute(
        "SELECT count(*) FROM tokens t JOIN words w USING (model_id, corpus, example_id, word_index) "
        "WHERE t.position < w.piece_start OR t.position >= w.piece_end"
    ).fetchone() == (0,)
    conn.close()

    charts = tmp_path / "charts" / spec.model_id
    # Charts with `when_empty` need corpora or assets the demo run has not got: skipped.
    for name in (chart.name for chart in CHARTS if not chart.when_empty):
        assert (charts / f"{name}.png").stat().st_size > 1000
        assert "vega" in (charts / f"{name}.html").read_text()
    materialization = instance.get_latest_materialization_event(fact_assets_by_corpus["demo"].key).asset_materialization
    assert materialization.metadata["head_summaries_rows"].value == 24 * TINY_LAYERS * TINY_HEADS
    assert "|" in materialization.metadata["preview"].value  # a markdown table

    # By default the same estimator's miss makes the run compute exact HTA: the written facts are
    # within tolerance, and both methods are recorded.
    fallback = _run_hta(instance, resources, spec.model_id, {"hta_method": "estimate(1)"})
    assert fallback.success
    [check] = [
        check for check in fallback.get_asset_check_evaluations() if check.check_name == "estimate_matches_exact"
    ]
    assert check.passed and not check.metadata["estimator_within_tolerance"].value
    assert check.metadata["hta_method_used"].value == "exact"
    metadata = instance.get_latest_materialization_event(
        hta_assets_by_corpus["demo"].key
    ).asset_materialization.metadata
    assert (metadata["hta_method"].value, metadata["hta_method_used"].value) == ("estimate(1)", "exact")
    # what a later plan reads to expect the fallback (reproduction.expected_fallback)
    assert metadata["estimator_within_tolerance"].value is False and metadata["check_examples"].value == 16
    with duckdb.connect(str(tmp_path / "warehouse.duckdb"), read_only=True) as conn:
        assert conn.execute("SELECT DISTINCT hta_method FROM hta_correlations").fetchall() == [("exact",)]
    assert not saved.exists()


def _run_hta(instance: DagsterInstance, resources: dict, model_id: str, config: dict):
    return materialize(
        all_assets,
        selection=AssetSelection.assets(hta_assets_by_corpus["demo"]),
        partition_key=model_id,
        instance=instance,
        resources=resources,
        run_config={"ops": {"demo_hta_facts": {"config": config}}},
        raise_on_error=False,
    )


def test_missing_corpus_file_fails_with_the_path(tiny_model_dir: Path, resources: dict, tmp_path: Path):
    instance = DagsterInstance.ephemeral()
    spec = register_model(str(tiny_model_dir), instance, resources["warehouse"])
    result = materialize(
        all_assets,
        selection=AssetSelection.assets(corpus_assets_by_name["xnli_en"]),
        partition_key=spec.model_id,
        instance=instance,
        resources=resources,
        raise_on_error=False,
    )
    assert not result.success
    cause = result.get_step_failure_events()[0].step_failure_data.error.cause
    assert cause.cls_name == "CorpusError"
    assert "xnli_validation_en.tsv" in cause.message and "ATTN_DATA_DIR" in cause.message


def test_bad_model_registers_nothing(resources: dict, tmp_path: Path):
    instance = DagsterInstance.ephemeral()
    with pytest.raises(ModelLoadError):
        register_model(str(tmp_path), instance, resources["warehouse"])
    assert instance.get_dynamic_partitions("models") == []
    assert not (tmp_path / "warehouse.duckdb").exists()
