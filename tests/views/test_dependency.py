"""clark_dependency_heads (Table 1) on fixture tables with hand-computed accuracies."""

import duckdb
import polars as pl
import pytest

from dagster_project.compute.models import ModelSpec
from dagster_project.storage.batches import partition_rows
from dagster_project.storage.model_rows import upsert_model
from dagster_project.storage.partition_writes import replace_partition

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
# Clark Table 1's rows
PAPER_RELATIONS = "All prep pobj det nn nsubj amod dobj advmod aux poss auxpass ccomp mark prt".split()


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
    # every relation of the paper's Table 1 whatever its count; 'case (UD)' (not the paper's) has 1 < 100 edges
    assert set(rows) == set(PAPER_RELATIONS)
    assert all(row["paper_relation"] for row in rows.values())
    # pobj's one edge (noun 3 -> preposition 4): head 1-1 makes the preposition pick the noun
    pobj = rows["pobj"]
    assert (pobj["layer"], pobj["head"], pobj["direction"], pobj["accuracy"], pobj["n"]) == (
        1,
        1,
        "head->dependent",
        1.0,
        1,
    )
    assert (pobj["baseline_offset"], pobj["baseline_accuracy"]) == (1, 1.0)
    # prep (preposition 4 -> the noun's head 2): 1-2 makes the preposition pick word 2, offset -2
    prep = rows["prep"]
    assert (prep["head"], prep["direction"], prep["n"], prep["baseline_offset"]) == (2, "dependent->head", 1, -2)
    # no nn edge at all: shown with n = 0 and no head
    nn = rows["nn"]
    assert (nn["n"], nn["layer"], nn["accuracy"], nn["baseline_accuracy"]) == (0, None, None, None)
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
    assert set(accuracy["relation"]) == {"All", "det", "nsubj", "dobj", "case (UD)", "pobj", "prep"}
    assert accuracy.filter(pl.col("relation") == "All")["direction"].unique().to_list() == ["dependent->head"]


# "John 's dog won't try to sit on the mat", UD EWT style: the possessive 's is a word of its
# own, "won't" one surface word of two syntactic words (wo + n't), `to` infinitival (UD mark).
# (ud_id, word_index, head_word_index, relation, upos, xpos, form)
SENTENCE = [
    (1, 0, 2, "nmod:poss", "PROPN", "NNP", "John"),
    (2, 1, 0, "case", "PART", "POS", "'s"),
    (3, 2, 4, "nsubj", "NOUN", "NN", "dog"),
    (4, 3, 4, "aux", "AUX", "MD", "wo"),
    (5, 3, 4, "advmod", "PART", "RB", "n't"),
    (6, 4, None, "root", "VERB", "VB", "try"),
    (7, 5, 6, "mark", "PART", "TO", "to"),
    (8, 6, 4, "xcomp", "VERB", "VB", "sit"),
    (9, 7, 9, "case", "ADP", "IN", "on"),
    (10, 8, 9, "det", "DET", "DT", "the"),
    (11, 9, 6, "obl", "NOUN", "NN", "mat"),
]
N_SENTENCES = 200
N_WORDS = 10
# Three heads: 1-1 picks the next word (the last word: the previous), 1-2 the previous (the
# first word: the next), 1-3 the word two to the right (where there is none: the previous).
PICKS = {
    1: lambda w: w + 1 if w + 1 < N_WORDS else w - 1,
    2: lambda w: w - 1 if w > 0 else 1,
    3: lambda w: w + 2 if w + 2 < N_WORDS else w - 1,
}
NO_HITS_WORD = 8  # "the" has no pieces in the second half of the sentences: no relation hits


def _sentence_fixture(conn: duckdb.DuckDBPyConnection) -> None:
    upsert_model(conn, SPEC)
    columns = ("ud_id", "word_index", "head_word_index", "relation", "upos", "xpos", "form")
    dependencies = pl.DataFrame(
        [{"example_id": e, **dict(zip(columns, row))} for e in range(N_SENTENCES) for row in SENTENCE]
    )
    hits = pl.DataFrame(
        [
            {"example_id": e, "word_index": w, "layer": 1, "head": head, "target_word": pick(w), "word_mode": "mean"}
            for e in range(N_SENTENCES)
            for head, pick in PICKS.items()
            for w in range(N_WORDS)
            if not (w == NO_HITS_WORD and e >= N_SENTENCES // 2)
        ]
    )
    replace_partition(conn, {"dependencies": dependencies, "relation_hits": hits}, SPEC.model_id, "ud")


def _table1(conn: duckdb.DuckDBPyConnection) -> dict[str, dict]:
    rows = partition_rows(conn, "clark_dependency_heads", SPEC.model_id).to_dicts()
    return {
        row["relation"]: (
            row["layer"],
            row["head"],
            row["direction"],
            row["accuracy"],
            row["baseline_offset"],
            row["n"],
        )
        for row in rows
    }


def test_sd_readings_of_ud_case_to_and_possessive_s(conn):
    _sentence_fixture(conn)
    table = _table1(conn)
    # SD pobj: the noun (mat, 9) depends on its preposition (on, 7); head 1-3 (two to the right)
    # makes "on" pick "mat": head -> dependent, and the baseline from the noun is -2.
    assert table["pobj"] == (1, 3, "head->dependent", 1.0, -2, N_SENTENCES)
    # UD case, as it is: 's -> John (-1) and on -> mat (+2); 1-1 gets John -> 's (head ->
    # dependent), misses mat -> on.
    assert table["case (UD)"] == (1, 1, "head->dependent", 0.5, -1, 2 * N_SENTENCES)
    # SD prep: on -> sit (the noun's UD head), the previous word: 1-1 makes "sit" pick "on".
    assert table["prep"] == (1, 1, "head->dependent", 1.0, -1, N_SENTENCES)
    # poss: the 's stands for John, so 's -> dog is the next word (UD John -> dog is +2).
    assert table["poss"] == (1, 1, "dependent->head", 1.0, 1, N_SENTENCES)
    # aux: wo -> try and the infinitival to -> sit; no `mark` is left.
    assert table["aux"] == (1, 1, "dependent->head", 1.0, 1, 2 * N_SENTENCES)
    assert table["mark"] == (None, None, None, None, None, 0)


def test_heads_and_baselines_count_the_same_edges_once(conn):
    _sentence_fixture(conn)
    table = _table1(conn)
    # "won't" is one word: its two halves (aux and advmod to "try") are one edge in 'All'.
    # 9 words with a head per sentence, "the" scored in half of them: 9 * 200 - 100 = 1700.
    # 1-3 gets John -> dog, dog -> try and on -> mat: 600; offset +2 likewise 600.
    assert table["All"] == (1, 3, "dependent->head", pytest.approx(600 / 1700), 2, 1700)
    baseline = partition_rows(conn, "int_dependency_offset_baselines", SPEC.model_id)
    assert baseline.filter(pl.col("relation") == "All", pl.col("baseline_offset") == 2)["accuracy"].item() == (
        pytest.approx(600 / 1700)
    )
    # det only where "the" has hits: the heads' and the baseline's n are both 100.
    assert table["det"][-1] == N_SENTENCES // 2
    counts = partition_rows(conn, "int_dependency_head_accuracy", SPEC.model_id)
    assert set(counts.filter(pl.col("relation") == "det")["n"]) == {N_SENTENCES // 2}
    assert set(baseline.filter(pl.col("relation") == "det")["n"]) == {N_SENTENCES // 2}
    assert table["advmod"][-1] == N_SENTENCES
