"""int_task_score_baselines: Kovaleva Table 1's scores on each task's metric with their standard
error, and whether a fine-tune learned its task (the precondition of the claims about fine-tuned
models), on hand-made task_scores and examples with hand-computed answers."""

import math

import duckdb
import polars as pl
import pytest

from dagster_project.compute.models import ModelSpec
from dagster_project.storage.model_rows import upsert_model
from dagster_project.storage.partition_writes import replace_partition

BASE = ModelSpec("org--base", "org/base", "/x", "r1", "bert", 2, 2, True)


def _scores(task: str, scores: dict[tuple[str, str], float], n_examples: int) -> pl.DataFrame:
    """task_scores rows of one task: (setting, metric) -> score, a fraction."""
    return pl.DataFrame(
        {
            "task": [task] * len(scores),
            "setting": [setting for setting, _ in scores],
            "metric": [metric for _, metric in scores],
            "score": list(scores.values()),
            "n_examples": [n_examples] * len(scores),
            "recipe": ["{}"] * len(scores),
            "seconds": [1.0] * len(scores),
        }
    )


def _labelled_examples(labels: list[float]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "example_id": list(range(len(labels))),
            "text_a": ["a"] * len(labels),
            "n_tokens": [4] * len(labels),
            "max_len": [128] * len(labels),
            "seed": [0] * len(labels),
            "split": ["validation"] * len(labels),
            "label": labels,
        }
    )


def _rows(conn: duckdb.DuckDBPyConnection) -> dict[tuple[str, str], dict]:
    rows = conn.execute("SELECT * FROM int_task_score_baselines WHERE model_id = ?", [BASE.model_id]).pl()
    return {(row["task"], row["setting"]): row for row in rows.to_dicts()}


def test_a_fine_tune_learned_its_task_when_it_beats_the_majority_class_beyond_chance(conn):
    upsert_model(conn, BASE)
    # RTE: 100 labels, 60 of class 1: the majority class scores 60.0; on the fine-tune's 400
    # examples its 95% upper end is 60 + 1.96 * sqrt(60 * 40 / 400) = 60 + 1.96 * 2.449 = 64.80.
    # MRPC: 80 of 100 labels of class 0; 80 + 1.96 * sqrt(80 * 20 / 100) = 80 + 7.84 = 87.84.
    rte = {("pretrained_finetuned", "accuracy"): 0.66, ("pretrained", "accuracy"): 0.5}
    replace_partition(
        conn,
        {"task_scores": _scores("rte", rte, 400), "examples": _labelled_examples([1.0] * 60 + [0.0] * 40)},
        BASE.model_id,
        "glue_rte",
    )
    mrpc = {("pretrained_finetuned", "accuracy"): 0.85, ("pretrained_finetuned", "f1"): 0.9}
    replace_partition(
        conn,
        {"task_scores": _scores("mrpc", mrpc, 100), "examples": _labelled_examples([0.0] * 80 + [1.0] * 20)},
        BASE.model_id,
        "glue_mrpc",
    )
    rows = _rows(conn)
    assert set(rows) == {("rte", "pretrained_finetuned"), ("rte", "pretrained"), ("mrpc", "pretrained_finetuned")}
    tuned = rows["rte", "pretrained_finetuned"]
    assert (tuned["baseline"], tuned["n_labels"]) == (pytest.approx(60.0), 100)
    assert tuned["bound"] == pytest.approx(60 + 1.96 * math.sqrt(6.0), abs=1e-9)
    assert tuned["score"] == pytest.approx(66.0) and tuned["learned"] is True
    assert tuned["score_se"] == pytest.approx(math.sqrt(66 * 34 / 400))  # 2.369 points
    assert tuned["note"] == (
        "rte: fine-tuned accuracy 66.0, above 64.8 (the majority class 60.0 and the 95% noise of 400 examples)"
    )
    # every setting of the task carries its fine-tune's verdict; its own score and error
    untrained = rows["rte", "pretrained"]
    assert (untrained["learned"], untrained["bound"]) == (True, pytest.approx(tuned["bound"]))
    assert untrained["score_se"] == pytest.approx(math.sqrt(50 * 50 / 400))  # 2.5 points
    # MRPC 85.0 is above its majority class (80.0) but not beyond its noise on 100 examples
    assert rows["mrpc", "pretrained_finetuned"]["bound"] == pytest.approx(87.84)
    assert rows["mrpc", "pretrained_finetuned"]["learned"] is False
    assert rows["mrpc", "pretrained_finetuned"]["note"].startswith("mrpc: fine-tuned accuracy 85.0, not above 87.8")


def test_sts_b_against_no_correlation_and_a_task_without_labels_or_a_constant_prediction(conn):
    upsert_model(conn, BASE)
    # STS-B: a constant prediction has no correlation; the bound on 103 examples is
    # 100 * tanh(1.96 / sqrt(100)) = 19.35, and the Pearson's standard error (1 - 0.25^2) / 10.
    stsb = {("pretrained_finetuned", "pearson"): 0.25, ("pretrained_finetuned", "spearman"): 0.9}
    replace_partition(conn, {"task_scores": _scores("stsb", stsb, 103)}, BASE.model_id, "glue_stsb")
    # SST-2 fine-tuned, but no glue_sst2 examples (so no labels) in the warehouse
    replace_partition(
        conn,
        {"task_scores": _scores("sst2", {("pretrained_finetuned", "accuracy"): 0.9}, 872)},
        BASE.model_id,
        "glue_sst2",
    )
    # CoLA: only the untrained setting (no fine-tune to judge)
    replace_partition(
        conn,
        {"task_scores": _scores("cola", {("pretrained", "accuracy"): 0.7}, 1043)},
        BASE.model_id,
        "glue_cola",
    )
    rows = _rows(conn)
    sts = rows["stsb", "pretrained_finetuned"]
    assert (sts["metric"], sts["baseline"], sts["n_labels"]) == ("pearson", 0, None)
    assert sts["bound"] == pytest.approx(100 * math.tanh(0.196))
    assert sts["score_se"] == pytest.approx(100 * (1 - 0.0625) / 10)
    assert sts["learned"] is True
    assert sts["note"].startswith("stsb: fine-tuned pearson 25.0, above 19.4 (a constant prediction 0.0")
    sst2 = rows["sst2", "pretrained_finetuned"]
    assert (sst2["learned"], sst2["bound"]) == (False, None)
    assert sst2["note"] == (
        "sst2: no majority class to compare with (no labels of glue_sst2 in the warehouse: "
        "attn-warehouse run org/base --corpus glue_sst2)"
    )
    assert (rows["cola", "pretrained"]["learned"], rows["cola", "pretrained"]["note"]) == (
        False,
        "cola: not fine-tuned from this model",
    )
    # a fine-tune that predicts a constant has no Pearson: NaN, not learned
    replace_partition(
        conn,
        {"task_scores": _scores("stsb", {("pretrained_finetuned", "pearson"): float("nan")}, 103)},
        BASE.model_id,
        "glue_stsb",
    )
    constant = _rows(conn)["stsb", "pretrained_finetuned"]
    assert (constant["learned"], constant["note"]) == (False, "stsb: the fine-tune predicts a constant (no pearson)")
