"""The reproduction profiles: what `attn-warehouse reproduce --quick` reduces, and its estimates."""

import pytest

from dagster_project.cli.reproduce import print_plan, with_user_config
from dagster_project.defs.reproduction import (
    QUICK_EXAMPLES,
    QUICK_HTA_EXAMPLES,
    ModelShape,
    planned_step,
    profile_run_config,
    rule_for,
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
    assert ops["xnli_en_hta_facts"]["config"]["max_examples"] == QUICK_HTA_EXAMPLES
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
    assert (quick.units, paper.units) == (QUICK_HTA_EXAMPLES, 1800)
    assert quick.seconds == pytest.approx(rule.fixed_seconds + rule.seconds_per_unit * QUICK_HTA_EXAMPLES)
    bert_base = planned_step("xnli_en_hta_facts", "quick", ModelShape(12, 768, 12))
    assert bert_base.seconds - rule.fixed_seconds == pytest.approx(8 * (quick.seconds - rule.fixed_seconds))
    ablation = planned_step("rte_ablation", "quick", MINILM)
    assert ablation.units == (1 + 72 + 6) * 32  # no head disabled, each head, each layer
    # HTA's exact fallback (its estimator misses the check on MiniLM) is planned beside the estimate
    assert paper.fallback_seconds == pytest.approx(rule.fixed_seconds + rule.fallback_seconds_per_unit * 1800)
    assert ablation.fallback_seconds is None


def test_the_plan_says_what_hta_costs_where_it_falls_back_to_exact(capsys: pytest.CaptureFixture) -> None:
    steps = [planned_step(name, "paper", MINILM) for name in ("xnli_en_hta_facts", "rte_ablation")]
    total = print_plan("m", "m", steps, [], [], "cpu")
    printed = capsys.readouterr().out
    assert total == pytest.approx(steps[0].seconds + steps[1].seconds)
    minutes = (steps[0].fallback_seconds + steps[1].seconds) / 60
    assert f"falls back to exact (xnli_en_hta_facts): {minutes:.1f} min" in printed
    assert steps[0].fallback_seconds > 25 * steps[0].seconds  # exact HTA: about 30x the estimator per example


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
    assert hta.fallback_seconds == pytest.approx(rule.fixed_seconds + rule.fallback_seconds_per_unit * 60)
    # never above the corpus
    assert planned_step("xnli_en_hta_facts", "paper", MINILM, {"max_examples": 5000}).units == 1800
    # 3 epochs of batches of 32 over the recorded subset, then max_steps where it is smaller
    assert planned_step("finetuned_sst2", "paper", MINILM, {"train_subset": 320}).units == 30
    assert planned_step("finetuned_sst2", "paper", MINILM, {"train_subset": 320, "max_steps": 20}).units == 20
    assert planned_step("rte_ablation", "paper", MINILM, {"max_examples": 10}).units == (1 + 72 + 6) * 10
    assert planned_step("dependency_probes", "paper", MINILM, {"max_sentences": 50}).units == 50
    assert planned_step("xnli_en_examples", "paper", MINILM, {"size": 100}).units == 100
