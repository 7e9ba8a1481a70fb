"""clark_dependency_heads (Table 1) on fixture tables with hand-computed accuracies."""

import duckdb
import polars as pl
import pytest

from dagster_project.compute.models import ModelSpec
from dagster_project.storage.warehouse import partition_rows, replace_partition, upsert_model

SPEC = ModelSpec("org--m", "org/m", "/x", "r1", "bert", 1, 2, True)
N_EXAMPLES = 100

# "the dog saw cats": det 0->1, nsubj 1->2, root 2, obj 3->2; plus one 'case' edge (rare).
EDGES = [(0, 1, "det", "DET"), (1, 2, "nsubj", "NOUN"), (2, None, "root", "VERB"), (3, 2, "obj", "NOUN")]
# Most-attended other word of each word 0..3 per head. Head 1-1 points every dependent at its
# head, except that in the second half of the examples the determiner looks at the verb.
# Head 1-2 attends to the previous word (word 0: the next one).
HEAD_1_1 = [1, 2, 1, 2]
HEAD_1_1_SECOND_HALF = [2, 2, 1, 2]
HEAD_1_2 = [1, 0, 1, 2]


def _fixture(conn: duckdb.DuckDBPyConnection) -> None:
    upsert_model(conn, SPEC)
    dependencies = pl.DataFrame(
        [
            {"example_id": e, "ud_id": w + 1, "word_index": w, "head_word_index": h, "relation": r, "upos": u}
            for e in range(N_EXAMPLES)
            for w, h, r, u in EDGES
        ]
        + [{"example_id": 0, "ud_id": 5, "word_index": 4, "head_word_index": 3, "relation": "case", "upos": "ADP"}]
    )
    hits = pl.DataFrame(
        [
            {"example_id": e, "word_index": w, "layer": 1, "head": head, "target_word": targets[w], "word_mode": "mean"}
            for e in range(N_EXAMPLES)
            for head, targets in ((1, HEAD_1_1 if e < N_EXAMPLES // 2 else HEAD_1_1_SECOND_HALF), (2, HEAD_1_2))
            for w in range(4)
        ]
        + [
            {
                "example_id": 0,
                "word_index": 4,
                "layer": 1,
                "head": head,
                "target_word": 3 - head + 1,
                "word_mode": "mean",
            }
            for head in (1, 2)
        ]
    )
    replace_partition(conn, {"dependencies": dependencies, "relation_hits": hits}, SPEC.model_id, "ud")


def test_best_head_and_baseline_per_relation(conn):
    _fixture(conn)
    rows = {row["relation"]: row for row in partition_rows(conn, "clark_dependency_heads", SPEC.model_id).to_dicts()}
    assert set(rows) == {"All", "det", "nsubj", "dobj"}  # 'pobj' (UD case) has 1 < 100 edges
    det = rows["det"]
    # 1-1 gets det right in half the examples; 1-2 (previous word, next for word 0) always.
    assert (det["layer"], det["head"], det["direction"], det["accuracy"]) == (1, 2, "dependent->head", 1.0)
    assert (det["baseline_offset"], det["baseline_accuracy"], det["n"]) == (1, 1.0, N_EXAMPLES)
    nsubj = rows["nsubj"]
    assert (nsubj["head"], nsubj["direction"], nsubj["accuracy"], nsubj["baseline_offset"]) == (
        1,
        "dependent->head",
        1.0,
        1,
    )
    assert (rows["dobj"]["baseline_offset"], rows["dobj"]["model"]) == (-1, "org/m")
    # All: 301 non-punctuation edges; 1-1 gets 50 + 100 + 100 + 1 of them, 1-2 gets 100 + 0 + 100 + 0.
    everything = rows["All"]
    assert (everything["head"], everything["n"]) == (1, 3 * N_EXAMPLES + 1)
    assert everything["accuracy"] == pytest.approx(251 / 301)
    assert (everything["baseline_offset"], everything["baseline_accuracy"]) == (1, pytest.approx(200 / 301))


def test_both_directions_and_the_relation_mapping(conn):
    _fixture(conn)
    accuracy = partition_rows(conn, "int_dependency_head_accuracy", SPEC.model_id)
    det = accuracy.filter((pl.col("relation") == "det") & (pl.col("head") == 2)).sort("direction")
    # head -> dependent: the noun (word 1) attends to word 0 under head 1-2.
    assert det.select("direction", "accuracy").rows() == [("dependent->head", 1.0), ("head->dependent", 1.0)]
    assert set(accuracy["relation"]) == {"All", "det", "nsubj", "dobj", "pobj"}
    assert accuracy.filter(pl.col("relation") == "All")["direction"].unique().to_list() == ["dependent->head"]
