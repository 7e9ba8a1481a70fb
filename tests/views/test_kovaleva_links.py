"""Kovaleva views over links between words on fixture tables with hand-computed answers:
FrameNet heads (§4.2, Fig. 3) and token-to-token pairs with punctuation (§4.5, Fig. 7)."""

import duckdb
import polars as pl
import pytest

from dagster_project.compute.models import ModelSpec
from dagster_project.storage.batches import partition_rows
from dagster_project.storage.model_rows import upsert_model
from dagster_project.storage.partition_writes import replace_partition
from dagster_project.storage.view_contracts import check_contracts

MODEL = ModelSpec("org--base", "org/base", "/x", "r1", "bert", 2, 2, True)

# Per head, the max attention of each link: sentence 0 has links A and B, sentence 1 link C.
LINK_VALUES = {
    (1, 1): {"A": 0.1, "B": 0.3, "C": 0.2},
    (1, 2): {"A": 0.2, "B": 0.2, "C": 0.2},
    (2, 1): {"A": 0.9, "B": 0.1, "C": 0.1},
    (2, 2): {"A": 0.4, "B": 0.4, "C": 0.4},
}
LINKS = {"A": (0, 1, 3), "B": (0, 4, 6), "C": (1, 1, 4)}  # example_id, element_start, element_end


def _framenet(conn: duckdb.DuckDBPyConnection) -> dict[tuple[int, int], dict]:
    upsert_model(conn, MODEL)
    links = pl.DataFrame(
        [
            {
                "example_id": LINKS[link][0],
                "target_start": 0,
                "target_end": 1,
                "element_start": LINKS[link][1],
                "element_end": LINKS[link][2],
                "layer": layer,
                "head": head,
                "max_attention": value,
            }
            for (layer, head), values in LINK_VALUES.items()
            for link, value in values.items()
        ]
    )
    replace_partition(conn, {"frame_link_attention": links}, MODEL.model_id, "framenet")
    rows = partition_rows(conn, "kovaleva_framenet_heads", MODEL.model_id).to_dicts()
    return {(row["layer"], row["head"]): row for row in rows}


def test_framenet_heads_average_sentences_and_flag_heads_above_the_p99_of_head_means(conn):
    rows = _framenet(conn)
    # per sentence the max over its links, then the mean over the 2 sentences (not the 3 links:
    # head 2-1 would be (0.9 + 0.1 + 0.1) / 3)
    means = {(1, 1): (0.3 + 0.2) / 2, (1, 2): 0.2, (2, 1): (0.9 + 0.1) / 2, (2, 2): 0.4}
    assert {key: row["mean_max_attention"] for key, row in rows.items()} == pytest.approx(means)
    # the paper's cutoff: the 4 head means .2 .25 .4 .5; quantile_cont 0.99 at 3 * 0.99 = 2.97
    p99 = 0.4 + 0.97 * (0.5 - 0.4)
    assert [row["p99"] for row in rows.values()] == pytest.approx([p99] * 4)
    assert {key for key, row in rows.items() if row["above_p99"]} == {(2, 1)}
    # its two sentences (0.9 and 0.1) leave its interval far below the cutoff
    assert rows[(2, 1)]["ci_low"] < p99 and not rows[(2, 1)]["above_p99_beyond_ci"]
    # the stricter reading: the 8 per-sentence values .1 .2 .2 .2 .3 .4 .4 .9; 7 * 0.99 = 6.93
    sentence_p99 = 0.4 + 0.93 * (0.9 - 0.4)
    assert [row["sentence_p99"] for row in rows.values()] == pytest.approx([sentence_p99] * 4)
    assert not any(row["above_sentence_p99"] for row in rows.values())
    assert rows[(2, 1)]["share_above_sentence_p99"] == 0.5 and rows[(2, 2)]["share_above_sentence_p99"] == 0.0
    assert (rows[(1, 1)]["n_sentences"], rows[(1, 1)]["n_links"]) == (2, 3)


def test_punctuation_is_a_feature_of_the_final_layer_cls_row(conn):
    """[CLS] really ? yes . [SEP]: '.' is a punct piece, '?' a word spaCy tags PUNCT; the final
    layer's [CLS] row gives them 0.25 and 0.2, so punctuation scores their max, 0.25."""
    upsert_model(conn, MODEL)
    classes = ["cls", "other", "other", "other", "punct", "sep"]
    tokens = pl.DataFrame(
        {
            "example_id": [0] * 6,
            "position": list(range(6)),
            "token_id": [101, 1, 2, 3, 4, 102],
            "token": ["[CLS]", "really", "?", "yes", ".", "[SEP]"],
            "token_class": classes,
            "is_special": [c in ("cls", "sep") for c in classes],
            "segment": [0] * 6,
            "word_index": [None, 0, 1, 2, 3, None],
        }
    )
    features = pl.DataFrame(
        {
            "example_id": [0] * 4,
            "word_index": [0, 1, 2, 3],
            "pos": ["ADV", "PUNCT", "INTJ", "PUNCT"],
            "spacy_alignment": ["exact"] * 4,
            **{flag: [False] * 4 for flag in ("is_noun", "is_verb", "is_pronoun", "is_subject", "is_object")},
            "is_negation": [False] * 4,
        }
    )
    received = pl.DataFrame(
        {
            "example_id": [0] * 6,
            "position": list(range(6)),
            "layer": [2] * 6,
            "head": [1] * 6,
            "received": [0.4, 0.1, 0.15, 0.05, 0.1, 0.2],
            "from_cls": [0.3, 0.1, 0.25, 0.05, 0.2, 0.1],
        }
    )
    replace_partition(
        conn, {"tokens": tokens, "word_features": features, "received_attention": received}, MODEL.model_id, "glue_rte"
    )
    cls_row = {
        row["feature"]: row["score"]
        for row in partition_rows(conn, "kovaleva_cls_attention", MODEL.model_id).to_dicts()
    }
    assert cls_row == pytest.approx({"[CLS]": 0.3, "[SEP]": 0.1, "punctuation": 0.25})
    received_by = {
        row["feature"]: row["score"]
        for row in partition_rows(conn, "kovaleva_feature_attention", MODEL.model_id).to_dicts()
    }
    assert received_by["punctuation"] == pytest.approx(0.15)


def test_framenet_heads_beside_their_ablation(conn):
    """Head 2-1, the one FrameNet head above p99, costs 1 point on RTE when disabled: the
    least harmful of the four (rank 4), against 5, 3 and 2 points for the others."""
    _framenet(conn)
    deltas = {(1, 1): -0.05, (1, 2): -0.03, (2, 1): -0.01, (2, 2): -0.02}
    scores = pl.DataFrame(
        {
            "task": ["rte"] * 4,
            "tuned_model_id": ["org--base-rte"] * 4,
            "kind": ["head"] * 4,
            "layer": [layer for layer, _ in deltas],
            "head": [head for _, head in deltas],
            "metric": ["accuracy"] * 4,
            "score": [0.6 + delta for delta in deltas.values()],
            "baseline_score": [0.6] * 4,
            "n_examples": [277] * 4,
        },
        schema_overrides={"layer": pl.Int16, "head": pl.Int16, "n_examples": pl.Int32},
    )
    replace_partition(conn, {"ablation_scores": scores}, MODEL.model_id, "glue_rte")
    rows = partition_rows(conn, "kovaleva_framenet_head_ablation", MODEL.model_id).to_dicts()
    by_head = {(row["layer"], row["head"]): row for row in rows}
    assert {key for key, row in by_head.items() if row["above_p99"]} == {(2, 1)}
    assert by_head[(2, 1)]["delta_vs_baseline"] == pytest.approx(-1.0)
    assert {key: row["delta_rank"] for key, row in by_head.items()} == {(1, 1): 1, (1, 2): 2, (2, 2): 3, (2, 1): 4}
    assert {row["n_heads"] for row in rows} == {4} and by_head[(2, 1)]["mean_max_attention"] == pytest.approx(0.5)
    assert check_contracts(conn) == {}  # the FrameNet heads and their ablation keep their grain and ranges
