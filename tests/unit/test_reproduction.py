"""The reproduction profiles: what `attn-warehouse reproduce --quick` reduces, and its estimates."""

import pytest
from dagster import AssetMaterialization, DagsterInstance

from dagster_project.cli.reproduce import print_plan, with_user_config
from dagster_project.corpora import CORPORA
from dagster_project.defs.reproduction import (
    QUICK_EXAMPLES,
    QUICK_HTA_EXAMPLES,
    ModelShape,
    expected_fallback,
    planned_step,
    profile_run_config,
    rule_for,
    with_expected_fallbacks,
)

MINILM = ModelShape(6, 384, 12)


def test_the_quick_profile_reduces_what_dominates_and_nothing_else() -> None:
    assets = [
        "xnli_en_examples",
        "framenet_examples",
        "xnli_en_hta_facts",
        "finetuned_rte",
        "rte_ablation",
        "paper_report",
    ]
    ops = profile_run_config(assets, "quick")["ops"]
    assert ops["xnli_en_examples"] == {"config": {"size": QUICK_EXAMPLES}}
    assert "framenet_examples" not in ops  # a small corpus is read whole
    # HTA exact outright on a few examples: an estimator's check would need 16 exact ones
    assert ops["xnli_en_hta_facts"]["config"] == {"max_examples": QUICK_HTA_EXAMPLES, "hta_method": "exact"}
    assert set(ops["finetuned_rte"]["config"]) == {"max_steps", "train_subset"}
    assert "paper_report" not in ops
    assert profile_run_config(assets, "paper") == {}  # the assets' defaults are the papers' settings


def test_a_chart_named_like_a_corpus_step_is_not_taken_for_one() -> None:
    assert rule_for("kovaleva_fig1_pattern_examples").assets == r".*"
    assert rule_for("glue_rte_train_examples").quick_config == {}  # training data: limited by train_subset


def test_estimates_scale_with_size_and_model() -> None:
    quick = planned_step("xnli_en_hta_facts", "quick", MINILM)
    paper = planned_step("xnli_en_hta_facts", "paper", MINILM)
    rule = rule_for("xnli_en_hta_facts")
    fixed, estimated, exact = rule.fixed_seconds, rule.seconds_per_unit, rule.checked.exact_seconds_per_unit
    assert (quick.units, paper.units) == (QUICK_HTA_EXAMPLES, 1800) and QUICK_HTA_EXAMPLES == 2
    # quick: exact HTA outright, no check and no fallback
    assert quick.seconds == pytest.approx(fixed + 2 * exact) and quick.fallback_seconds is None
    bert_base = planned_step("xnli_en_hta_facts", "quick", ModelShape(12, 768, 12))
    assert bert_base.seconds - fixed == pytest.approx(8 * (quick.seconds - fixed))
    ablation = planned_step("rte_ablation", "quick", MINILM)
    assert ablation.units == (1 + 72 + 6) * 32  # no head disabled, each head, each layer
    # paper: 16 examples both ways, then 1800 by the estimator, or the other 1784 by exact HTA
    assert paper.seconds == pytest.approx(fixed + 16 * (exact + estimated) + 1800 * estimated)
    assert paper.fallback_seconds == pytest.approx(fixed + 16 * (exact + estimated) + 1784 * exact)
    assert ablation.fallback_seconds is None
    # run exact outright: no check, no fallback
    outright = planned_step("xnli_en_hta_facts", "paper", MINILM, {"hta_method": "exact", "max_examples": 10})
    assert outright.seconds == pytest.approx(fixed + 10 * exact) and outright.fallback_seconds is None


def test_the_plan_says_what_hta_costs_where_it_falls_back_to_exact(capsys: pytest.CaptureFixture) -> None:
    steps = [planned_step(name, "paper", MINILM) for name in ("xnli_en_hta_facts", "rte_ablation")]
    total = print_plan("m", "m", steps, [], [], "cpu")
    printed = capsys.readouterr().out
    assert total == pytest.approx(steps[0].seconds + steps[1].seconds)
    minutes = (steps[0].fallback_seconds + steps[1].seconds) / 60
    assert f"falls back to exact (xnli_en_hta_facts): {minutes:.1f} min" in printed
    # exact HTA costs about 20x the estimator per example; the check's 16 exact examples are in both
    assert steps[0].fallback_seconds > 15 * steps[0].seconds


def _record_hta(instance: DagsterInstance, asset: str, method: str, within: bool | None, examples: int | None) -> None:
    """A materialization of an HTA step for partition m, as the asset records its check."""
    metadata = {"hta_method": method, "hta_method_used": method if within is not False else "exact"}
    if within is not None:
        metadata |= {"estimator_within_tolerance": within, "check_examples": examples}
    instance.report_runless_asset_event(AssetMaterialization(asset, partition="m", metadata=metadata))


def test_a_fallback_is_expected_until_a_check_of_the_method_passed_on_enough_examples() -> None:
    instance = DagsterInstance.ephemeral()
    others = ["xnli_de_hta_facts"]
    method = "hutchpp(16,8,bf16)"
    # nothing recorded: nothing shows the estimator passes on this model
    none_yet = expected_fallback(instance, "m", "xnli_en_hta_facts", method, others)
    assert none_yet == f"no check of {method} on 16 or more examples has passed for this model yet"
    # a pass elsewhere on 4 examples is not enough; on 16 it is
    _record_hta(instance, "xnli_de_hta_facts", method, True, 4)
    assert expected_fallback(instance, "m", "xnli_en_hta_facts", method, others) == none_yet
    _record_hta(instance, "xnli_de_hta_facts", method, True, 16)
    assert expected_fallback(instance, "m", "xnli_en_hta_facts", method, others) is None
    # another method's record says nothing of this one
    assert expected_fallback(instance, "m", "xnli_en_hta_facts", "estimate(8)", others) is not None
    # a miss elsewhere is expected here, unless the step's own last check passed
    _record_hta(instance, "xnli_de_hta_facts", method, False, 16)
    missed = expected_fallback(instance, "m", "xnli_en_hta_facts", method, others)
    assert missed == "its check missed on xnli_de_hta_facts's last run for this model"
    _record_hta(instance, "xnli_en_hta_facts", method, True, 8)
    assert expected_fallback(instance, "m", "xnli_en_hta_facts", method, others) is None
    _record_hta(instance, "xnli_en_hta_facts", method, False, 16)
    own = expected_fallback(instance, "m", "xnli_en_hta_facts", method, others)
    assert own == "its check missed on its last run for this model"
    # a record from before the verdict was kept: its fallback is a miss
    _record_hta(instance, "xnli_ar_hta_facts", method, None, None)
    instance.report_runless_asset_event(
        AssetMaterialization(
            "xnli_ar_hta_facts", partition="n", metadata={"hta_method": method, "hta_method_used": "exact"}
        )
    )
    assert expected_fallback(instance, "n", "xnli_ar_hta_facts", method, []) == own


def test_the_plans_total_counts_an_expected_fallback_and_says_why(capsys: pytest.CaptureFixture) -> None:
    steps = [planned_step(name, "paper", MINILM) for name in ("xnli_en_hta_facts", "rte_ablation")]
    steps = with_expected_fallbacks(steps, DagsterInstance.ephemeral(), "m", {})
    assert steps[1].fallback_reason is None
    total = print_plan("m", "m", steps, [], [], "cpu")
    printed = capsys.readouterr().out
    assert total == pytest.approx(steps[0].fallback_seconds + steps[1].seconds)
    assert f"estimated: {total / 60:.1f} min, HTA by exact where its estimator is expected to miss" in printed
    assert "xnli_en_hta_facts: no check of hutchpp(16,8,bf16) on 16 or more examples has passed" in printed
    best = (steps[0].seconds + steps[1].seconds) / 60
    assert f"where HTA's estimator passes its check instead (xnli_en_hta_facts): {best:.1f} min" in printed
    assert "falls back" not in printed


def test_the_users_values_go_over_the_profiles() -> None:
    profile = {"ops": {"xnli_en_hta_facts": {"config": {"max_examples": 30, "check_examples": 1}}}}
    user = {
        "ops": {
            "xnli_en_hta_facts": {"config": {"hta_method": "exact", "max_examples": 5}},
            "head_mds": {"config": {"metric_mds": True}},
        }
    }
    merged = with_user_config(profile, user)
    assert merged["ops"]["xnli_en_hta_facts"]["config"] == {
        "max_examples": 5,
        "check_examples": 1,
        "hta_method": "exact",
    }
    assert merged["ops"]["head_mds"] == {"config": {"metric_mds": True}}
    assert profile["ops"]["xnli_en_hta_facts"]["config"]["max_examples"] == 30  # the profile is not changed


def test_the_plan_sizes_a_step_by_the_users_limits() -> None:
    rule = rule_for("xnli_en_hta_facts")
    hta = planned_step("xnli_en_hta_facts", "paper", MINILM, {"max_examples": 60})
    assert hta.units == 60
    exact, estimated = rule.checked.exact_seconds_per_unit, rule.seconds_per_unit
    assert hta.fallback_seconds == pytest.approx(rule.fixed_seconds + 16 * (exact + estimated) + 44 * exact)
    # never above the corpus
    assert planned_step("xnli_en_hta_facts", "paper", MINILM, {"max_examples": 5000}).units == 1800
    # 3 epochs of batches of 32 over the recorded subset, then max_steps where it is smaller
    assert planned_step("finetuned_sst2", "paper", MINILM, {"train_subset": 320}).units == 30
    assert planned_step("finetuned_sst2", "paper", MINILM, {"train_subset": 320, "max_steps": 20}).units == 20
    assert planned_step("rte_ablation", "paper", MINILM, {"max_examples": 10}).units == (1 + 72 + 6) * 10
    assert planned_step("dependency_probes", "paper", MINILM, {"max_sentences": 50}).units == 50
    assert planned_step("xnli_en_examples", "paper", MINILM, {"size": 100}).units == 100


def test_the_faithfulness_is_sized_by_its_task_corpus_and_the_users_limit() -> None:
    rule = rule_for("weighting_faithfulness")
    paper, quick = (planned_step("weighting_faithfulness", profile, MINILM) for profile in ("paper", "quick"))
    size = CORPORA["glue_sst2"].size  # the examples of SST-2's validation split the corpus takes at most
    assert (paper.units, quick.units) == (size, QUICK_EXAMPLES)
    assert paper.seconds == pytest.approx(rule.fixed_seconds + rule.seconds_per_unit * size)
    assert planned_step("weighting_faithfulness", "paper", MINILM, {"max_examples": 50}).units == 50


def test_a_corpus_capped_at_d_head_counts_the_examples_that_fit_the_model() -> None:
    fitting = ModelShape(6, 384, 12, {"xnli_ar": 36, "xnli_de": 483})
    assert planned_step("xnli_ar_hta_facts", "paper", fitting).units == 36
    assert planned_step("xnli_de_hta_facts", "paper", fitting).units == 483
    assert planned_step("xnli_de_hta_facts", "quick", fitting).units == QUICK_HTA_EXAMPLES
    assert planned_step("xnli_de_examples", "quick", fitting).units == QUICK_EXAMPLES  # 200 of the 483
    assert planned_step("xnli_en_hta_facts", "paper", fitting).units == 1800  # not counted: its size
    # 36 Arabic pairs: the check's 16 exact examples, then the other 20 by exact where it misses
    rule = rule_for("xnli_ar_hta_facts")
    exact, estimated = rule.checked.exact_seconds_per_unit, rule.seconds_per_unit
    fallback = planned_step("xnli_ar_hta_facts", "paper", fitting).fallback_seconds
    assert fallback == pytest.approx(rule.fixed_seconds + 16 * (exact + estimated) + 20 * exact)


def test_examples_that_fit_counts_what_the_corpus_asset_keeps(tiny_model_dir, tmp_path, monkeypatch) -> None:
    """Two XNLI pairs per file of which one fits 12 pieces: the count is the encoded corpus's, per present corpus."""
    from transformers import AutoTokenizer

    from dagster_project.defs.reproduction import examples_that_fit

    folder = tmp_path / "xnli"
    folder.mkdir()
    rows = "id\tpremise\thypothesis\tlabel\n0\tA cat.\tA dog.\t0\n1\t" + "\t".join(["word " * 40] * 2) + "\t1\n"
    for split in ("validation", "test"):
        (folder / f"xnli_{split}_de.tsv").write_text(rows)
    monkeypatch.setenv("ATTN_DATA_DIR", str(tmp_path))
    counts = examples_that_fit(AutoTokenizer.from_pretrained(tiny_model_dir), 12)
    assert counts == {"xnli_de": 2}  # one short pair per file; English and Arabic are absent
