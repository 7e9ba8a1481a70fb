"""Kovaleva views (pattern shares, feature and [CLS] attention, fine-tuning similarity) on
fixture tables with hand-computed answers; FrameNet heads: test_kovaleva_links.py."""

import duckdb
import polars as pl
import pytest

from dagster_project.compute.models import ModelSpec
from dagster_project.storage.batches import partition_rows
from dagster_project.storage.model_rows import upsert_model
from dagster_project.storage.partition_writes import replace_partition

BASE = ModelSpec("org--base", "org/base", "/x", "r1", "bert", 2, 2, True)
TUNED = ModelSpec("org--base-rte", "/cache/finetuned/base-rte", "/y", "r1", "bert", 2, 2, True)


def _rows(conn: duckdb.DuckDBPyConnection, view: str, model: ModelSpec = BASE) -> list[dict]:
    return partition_rows(conn, view, model.model_id).to_dicts()


def test_pattern_shares_include_empty_classes(conn):
    upsert_model(conn, BASE)
    patterns = ["vertical"] * 4 + ["heterogeneous"] * 2 + ["diagonal"] * 2
    summaries = pl.DataFrame(
        {
            "example_id": [i // 4 for i in range(8)],
            "layer": [1 + i % 4 // 2 for i in range(8)],
            "head": [1 + i % 2 for i in range(8)],
            "n_tokens": [5] * 8,
            "pattern": patterns,
        }
    )
    replace_partition(conn, {"head_summaries": summaries}, BASE.model_id, "glue_rte")
    shares = {row["pattern"]: row["share"] for row in _rows(conn, "kovaleva_pattern_shares")}
    assert shares == {"vertical": 0.5, "diagonal": 0.25, "vertical+diagonal": 0.0, "block": 0.0, "heterogeneous": 0.25}
    assert {row["task"] for row in _rows(conn, "kovaleva_pattern_shares")} == {"glue_rte"}


def _token_fixture(conn: duckdb.DuckDBPyConnection, model: ModelSpec, cls_received: float) -> None:
    """Two examples: [CLS] dogs bark [SEP] (dogs: noun subject, bark: verb) and [CLS] it [SEP]
    (it: pronoun); received and [CLS]-row attention for layer 2 (the last), head 1."""
    upsert_model(conn, model)
    tokens = pl.DataFrame(
        {
            "example_id": [0, 0, 0, 0, 1, 1, 1],
            "position": [0, 1, 2, 3, 0, 1, 2],
            "token_id": [101, 1, 2, 102, 101, 3, 102],
            "token": ["[CLS]", "dogs", "bark", "[SEP]", "[CLS]", "it", "[SEP]"],
            "token_class": ["cls", "other", "other", "sep", "cls", "other", "sep"],
            "is_special": [True, False, False, True, True, False, True],
            "segment": [0] * 7,
            "word_index": [None, 0, 1, None, None, 0, None],
        }
    )
    features = pl.DataFrame(
        {
            "example_id": [0, 0, 1],
            "word_index": [0, 1, 0],
            "spacy_alignment": ["exact"] * 3,
            "is_noun": [True, False, False],
            "is_verb": [False, True, False],
            "is_pronoun": [False, False, True],
            "is_subject": [True, False, True],
            "is_object": [False] * 3,
            "is_negation": [False] * 3,
        }
    )
    received = pl.DataFrame(
        {
            "example_id": [0, 0, 0, 0, 1, 1, 1],
            "position": [0, 1, 2, 3, 0, 1, 2],
            "layer": [2] * 7,
            "head": [1] * 7,
            "received": [cls_received, 0.3, 0.2, 0.5 - cls_received, cls_received, 0.3, 0.7 - cls_received],
            "from_cls": [0.5, 0.2, 0.2, 0.1, 0.6, 0.3, 0.1],
        }
    )
    pairs = pl.DataFrame(
        {"example_id": [0], "pair": ["verb_subject"], "layer": [2], "head": [1], "attention": [0.25], "pairs": [1]}
    )
    replace_partition(
        conn,
        {"tokens": tokens, "word_features": features, "received_attention": received, "feature_pair_attention": pairs},
        model.model_id,
        "glue_rte",
    )


def test_feature_attention_is_max_over_tokens_mean_over_examples(conn):
    _token_fixture(conn, BASE, cls_received=0.4)
    scores = {row["feature"]: (row["score"], row["n_examples"]) for row in _rows(conn, "kovaleva_feature_attention")}
    assert scores == {
        "[CLS]": (pytest.approx(0.4), 2),
        "[SEP]": (pytest.approx((0.1 + 0.3) / 2), 2),
        "noun": (pytest.approx(0.3), 1),
        "verb": (pytest.approx(0.2), 1),
        "pronoun": (pytest.approx(0.3), 1),
        "subject": (pytest.approx((0.3 + 0.3) / 2), 2),
        "verb->subject": (pytest.approx(0.25), 1),
    }
    assert {row["role"] for row in _rows(conn, "kovaleva_feature_attention")} == {"pre-trained"}


def test_cls_attention_reads_the_last_layer_cls_row(conn):
    _token_fixture(conn, BASE, cls_received=0.4)
    scores = {row["feature"]: row["score"] for row in _rows(conn, "kovaleva_cls_attention")}
    assert scores == pytest.approx(
        {"[CLS]": 0.55, "[SEP]": 0.1, "noun": 0.2, "verb": 0.2, "pronoun": 0.3, "subject": 0.25}
    )
    # the length-normalized reading: each example's weight over its length (4 and 3 tokens) first
    per_length = {row["feature"]: row["score_per_length"] for row in _rows(conn, "kovaleva_cls_attention")}
    assert per_length == pytest.approx(
        {
            "[CLS]": (0.5 / 4 + 0.6 / 3) / 2,
            "[SEP]": (0.1 / 4 + 0.1 / 3) / 2,
            "noun": 0.2 / 4,
            "verb": 0.2 / 4,
            "pronoun": 0.3 / 3,
            "subject": (0.2 / 4 + 0.3 / 3) / 2,
        }
    )


def _record_finetuned(conn: duckdb.DuckDBPyConnection) -> None:
    """finetuned_rte's row for BASE: it saved and registered TUNED (the link the views use)."""
    scores = pl.DataFrame(
        {
            "task": ["rte"],
            "setting": ["pretrained_finetuned"],
            "metric": ["accuracy"],
            "score": [0.6],
            "n_examples": [277],
            "tuned_model_id": [TUNED.model_id],
            "recipe": ["{}"],
            "seconds": [1.0],
        }
    )
    replace_partition(conn, {"task_scores": scores}, BASE.model_id, "glue_rte")


def test_finetuned_model_beside_its_base(conn):
    _token_fixture(conn, BASE, cls_received=0.4)
    _token_fixture(conn, TUNED, cls_received=0.1)
    _record_finetuned(conn)
    cosines = pl.DataFrame(
        {
            "tuned_model_id": [TUNED.model_id] * 2,
            "example_id": [0, 1],
            "layer": [2, 2],
            "head": [1, 1],
            "cosine": [0.9, 0.7],
        }
    )
    replace_partition(conn, {"finetune_cosines": cosines}, BASE.model_id, "glue_rte")
    similarity = _rows(conn, "kovaleva_finetune_similarity")
    assert len(similarity) == 1
    assert similarity[0] | {"cosine": round(similarity[0]["cosine"], 6)} == similarity[0] | {
        "model": "org/base",
        "base_model": "org/base",
        "tuned_model": TUNED.source,
        "task": "glue_rte",
        "cosine": 0.8,
        "n_examples": 2,
    }
    tuned = {row["feature"]: row for row in _rows(conn, "kovaleva_feature_attention", TUNED)}
    assert tuned["[CLS]"]["role"] == "fine-tuned" and tuned["[CLS]"]["base_model"] == "org/base"
    assert (tuned["[CLS]"]["score"], tuned["[CLS]"]["base_score"]) == (pytest.approx(0.1), pytest.approx(0.4))
    assert tuned["verb->subject"]["base_score"] == pytest.approx(0.25)
    assert {row["role"] for row in _rows(conn, "kovaleva_feature_attention")} == {"pre-trained"}


def test_fine_tuned_rows_are_drawn_beside_the_pre_trained_ones_per_task(conn):
    """Figs. 2, 6 and 7 for the base model show, per task, the base and the model fine-tuned on
    that task (before: only the base model's rows, of the first GLUE corpus with rows)."""
    from dagster_project.presentation.chart_registry import CHARTS

    _token_fixture(conn, BASE, cls_received=0.4)
    _token_fixture(conn, TUNED, cls_received=0.1)
    summaries = pl.DataFrame({"example_id": [0, 1], "layer": [2, 2], "head": [1, 1], "n_tokens": [4, 3]})
    for model, patterns in ((BASE, ["vertical", "vertical"]), (TUNED, ["vertical", "heterogeneous"])):
        replace_partition(
            conn, {"head_summaries": summaries.with_columns(pattern=pl.Series(patterns))}, model.model_id, "glue_rte"
        )
    # CoLA (not in the paper) has rows too, and comes after the paper's tasks
    replace_partition(
        conn, {"head_summaries": summaries.with_columns(pattern=pl.lit("diagonal"))}, BASE.model_id, "glue_cola"
    )
    _record_finetuned(conn)
    charts = {spec.name: spec for spec in CHARTS}
    corpus, shares = charts["kovaleva_fig2_pattern_shares"].rows(conn, BASE.model_id)
    assert corpus == "glue_rte, glue_cola"
    got = {
        (row["task"], row["role"], row["model"], row["pattern"]): row["share"]
        for row in shares.filter(pl.col("share") > 0).to_dicts()
    }
    assert got == {
        ("glue_rte", "pre-trained", "org/base", "vertical"): 1.0,
        ("glue_rte", "fine-tuned", TUNED.source, "vertical"): 0.5,
        ("glue_rte", "fine-tuned", TUNED.source, "heterogeneous"): 0.5,
        ("glue_cola", "pre-trained", "org/base", "diagonal"): 1.0,
    }
    assert shares["model_id"][0] == BASE.model_id  # the chart's title names the base model
    _, special = charts["kovaleva_fig6_special_tokens"].rows(conn, BASE.model_id)
    cls = {row["role"]: row["score"] for row in special.filter(pl.col("feature") == "[CLS]").to_dicts()}
    assert cls == {"pre-trained": pytest.approx(0.4), "fine-tuned": pytest.approx(0.1)}
    _, final_layer = charts["kovaleva_fig7_cls_attention"].rows(conn, BASE.model_id)
    assert set(zip(final_layer["role"], final_layer["base_model_id"])) == {
        ("pre-trained", BASE.model_id),
        ("fine-tuned", BASE.model_id),
    }
    for name, rows in (
        ("kovaleva_fig2_pattern_shares", shares),
        ("kovaleva_fig6_special_tokens", special),
        ("kovaleva_fig7_cls_attention", final_layer),
    ):
        drawn = charts[name].draw(rows, "org/base").to_dict()
        assert {row["role"] for row in next(iter(drawn["datasets"].values()))} == {"pre-trained", "fine-tuned"}
    # the fine-tuned model's own charts show its own rows
    _, own = charts["kovaleva_fig2_pattern_shares"].rows(conn, TUNED.model_id)
    assert set(own["model_id"]) == {TUNED.model_id} and set(own["role"]) == {"fine-tuned"}


def test_kovaleva_chart_labels_are_the_papers_figures():
    """Table 1 scores, Fig. 1 example maps, Fig. 2 shares, Fig. 3 FrameNet, Fig. 5 cosine, Fig. 6
    [SEP]/[CLS] per task, Fig. 7 final-layer [CLS] row, Figs. 8/9 ablations."""
    from dagster_project.presentation.chart_registry import CHARTS

    figures = {spec.name: spec.figure for spec in CHARTS if spec.paper == "kovaleva"}
    assert figures == {
        "kovaleva_table1_task_scores": "Table 1",
        "kovaleva_fig1_pattern_examples": "Fig. 1",
        "kovaleva_fig2_pattern_shares": "Fig. 2",
        "kovaleva_fig3_framenet_heads": "Fig. 3",
        "kovaleva_fig5_finetune_similarity": "Fig. 5",
        "kovaleva_fig6_special_tokens": "Fig. 6",
        "kovaleva_sec44_feature_attention": "§4.4-4.5",
        "kovaleva_fig7_cls_attention": "Fig. 7",
        "kovaleva_fig8_head_ablation": "Fig. 8",
        "kovaleva_fig9_layer_ablation": "Fig. 9",
        "kovaleva_sec5_framenet_ablation": "§5",
    }


def test_pattern_example_maps_carry_the_tokens_on_both_axes(conn):
    upsert_model(conn, BASE)
    tokens = pl.DataFrame(
        {
            "example_id": [3, 3],
            "position": [0, 1],
            "token_id": [101, 102],
            "token": ["[CLS]", "[SEP]"],
            "token_class": ["cls", "sep"],
            "is_special": [True, True],
            "segment": [0, 0],
        }
    )
    maps = pl.DataFrame(
        {
            "example_id": [3] * 4,
            "pattern": ["vertical"] * 4,
            "layer": [2] * 4,
            "head": [1] * 4,
            "query": [0, 0, 1, 1],
            "key": [0, 1, 0, 1],
            "attention": [0.75, 0.25, 1.0, 0.0],
        }
    )
    replace_partition(conn, {"tokens": tokens, "pattern_example_maps": maps}, BASE.model_id, "glue_rte")
    rows = partition_rows(conn, "kovaleva_pattern_example_maps", BASE.model_id).sort("query", "key")
    assert rows.select("task", "query_token", "key_token", "attention").rows() == [
        ("glue_rte", "[CLS]", "[CLS]", 0.75),
        ("glue_rte", "[CLS]", "[SEP]", 0.25),
        ("glue_rte", "[SEP]", "[CLS]", 1.0),
        ("glue_rte", "[SEP]", "[SEP]", 0.0),
    ]
    assert rows["relative_depth"].to_list() == pytest.approx([0.75] * 4)
