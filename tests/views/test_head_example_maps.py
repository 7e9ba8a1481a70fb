"""clark_head_example_maps (Clark Figs. 1 and 5) on hand-built rows: which head each figure
names, the kept maps of those heads unnested from the dense rows, and the tokens on both axes."""

import duckdb
import polars as pl
import pytest

from dagster_project.compute.models import ModelSpec
from dagster_project.storage.batches import partition_rows
from dagster_project.storage.model_rows import upsert_model
from dagster_project.storage.partition_writes import replace_partition
from tests.views.test_coreference import CORPUS as COREF_CORPUS
from tests.views.test_coreference import MODEL as COREF_MODEL
from tests.views.test_coreference import _fill as fill_coreference

SPEC = ModelSpec("org--m", "org/m", "/x", "r1", "bert", 1, 3, True)
# Example 0 "the dog barked" (det 0 -> 1, nsubj 1 -> 2), example 1 "she saw cats" (nsubj 0 -> 1,
# obj 2 -> 1); each as [CLS] w0 w1 w2 [SEP], so word w is token w + 1.
WORDS = {0: ["the", "dog", "barked"], 1: ["she", "saw", "cats"]}
EDGES = {0: [(0, 1, "det"), (1, 2, "nsubj"), (2, None, "root")], 1: [(0, 1, "nsubj"), (1, None, "root"), (2, 1, "obj")]}
# Each head's most-attended other word per word. det: only 1-3 is right (the -> dog); dobj: only
# 1-1 (cats -> saw, and saw -> cats the other way; the tie goes to dependent->head).
PICKS = {
    1: {0: [2, 2, 1], 1: [1, 2, 1]},
    2: {0: [2, 2, 0], 1: [2, 0, 0]},
    3: {0: [1, 2, 1], 1: [2, 0, 0]},
}
# Per head (1, 2, 3) the same value on both examples, so the corpus means are these.
# broad: 1-1 (largest entropy); next token: 1-2; [SEP]: 1-3; '. and ,': 1-2 and 1-3 tie, the lower head wins.
SUMMARIES = {
    "entropy": [1.0, 0.5, 0.25],
    "to_next": [0.125, 0.75, 0.125],
    "to_sep": [0.25, 0.125, 0.5],
    "to_punct": [0.0, 0.375, 0.375],
}
N = 5  # tokens per example


def _map(head: int, query: int) -> list[float]:
    """Head h's row of query q: all of it on key (q + h) mod N."""
    return [1.0 if key == (query + head) % N else 0.0 for key in range(N)]


def _tables() -> dict[str, pl.DataFrame]:
    tokens = pl.DataFrame(
        [
            {
                "example_id": e,
                "position": p,
                "token_id": 100 + p,
                "token": token,
                "token_class": {0: "cls", N - 1: "sep"}.get(p, "other"),
                "is_special": p in (0, N - 1),
                "segment": 0,
            }
            for e, words in WORDS.items()
            for p, token in enumerate(["[CLS]", *words, "[SEP]"])
        ]
    )
    summaries = pl.DataFrame(
        [
            {"example_id": e, "layer": 1, "head": h, "n_tokens": N, **{k: v[h - 1] for k, v in SUMMARIES.items()}}
            for e in WORDS
            for h in (1, 2, 3)
        ],
        schema_overrides={"layer": pl.Int16, "head": pl.Int16, "n_tokens": pl.Int16},
    )
    dependencies = pl.DataFrame(
        [
            {"example_id": e, "ud_id": w + 1, "word_index": w, "head_word_index": h, "relation": r, "upos": "X"}
            for e, edges in EDGES.items()
            for w, h, r in edges
        ]
    )
    hits = pl.DataFrame(
        [
            {"example_id": e, "word_index": w, "layer": 1, "head": head, "target_word": t, "word_mode": "mean"}
            for head, per_example in PICKS.items()
            for e, targets in per_example.items()
            for w, t in enumerate(targets)
        ]
    )
    maps = pl.DataFrame(
        [
            {"example_id": e, "layer": 1, "head": h, "query": q, "attention": _map(h, q), "kept_examples": 2}
            for e in WORDS
            for h in (1, 2, 3)
            for q in range(N)
        ],
        schema_overrides={"layer": pl.Int16, "head": pl.Int16, "query": pl.Int16, "attention": pl.List(pl.Float32)},
    )
    return {
        "tokens": tokens,
        "head_summaries": summaries,
        "dependencies": dependencies,
        "relation_hits": hits,
        "head_example_maps": maps,
    }


def test_the_figures_name_their_heads_and_show_their_kept_maps(conn: duckdb.DuckDBPyConnection) -> None:
    upsert_model(conn, SPEC)
    replace_partition(conn, _tables(), SPEC.model_id, "ud_ewt_test")
    rows = partition_rows(conn, "clark_head_example_maps", SPEC.model_id)
    named = rows.select("figure", "role", "layer", "head", "direction").unique().sort("figure", "role")
    assert named.rows() == [
        ("Fig. 1", ". and ,", 1, 2, None),
        ("Fig. 1", "[SEP]", 1, 3, None),
        ("Fig. 1", "broad", 1, 1, None),
        ("Fig. 1", "next token", 1, 2, None),
        ("Fig. 5", "det", 1, 3, "dependent->head"),
        ("Fig. 5", "dobj", 1, 1, "dependent->head"),
    ]
    scores = dict(rows.select("role", "score").unique().iter_rows())
    assert scores == pytest.approx(
        {"broad": 1.0, "next token": 0.75, "[SEP]": 0.5, ". and ,": 0.375, "det": 1.0, "dobj": 1.0}
    )
    # every named head's whole map on both kept examples: 2 x 5 x 5 cells per role
    assert rows.group_by("role").len().sort("role")["len"].to_list() == [2 * N * N] * 6
    assert set(rows["kept_examples"]) == {2} and set(rows["corpus"]) == {"ud_ewt_test"}
    assert rows["relative_depth"].to_list() == pytest.approx([0.5] * rows.height)
    # the [SEP] head (1-3) on "she saw cats": [CLS] -> key 3 ("cats"), "cats" -> key (3 + 3) mod 5 = 1 ("she")
    sep = rows.filter((pl.col("role") == "[SEP]") & (pl.col("example_id") == 1) & (pl.col("attention") > 0))
    assert sep.sort("query").select("query", "key", "query_token", "key_token", "attention").rows() == [
        (0, 3, "[CLS]", "cats", 1.0),
        (1, 4, "she", "[SEP]", 1.0),
        (2, 0, "saw", "[CLS]", 1.0),
        (3, 1, "cats", "she", 1.0),
        (4, 2, "[SEP]", "saw", 1.0),
    ]
    # the rows of each map sum to 1 and every key of the query's row is there
    sums = rows.group_by("role", "example_id", "query").agg(pl.col("attention").sum(), keys=pl.len())
    assert (sums["attention"] == 1.0).all() and (sums["keys"] == N).all()
    # gold_links: the example's edges of the relation (Fig. 5); none for Fig. 1
    links = rows.select("role", "example_id", "gold_links").unique().sort("role", "example_id")
    assert links.filter(pl.col("role").is_in(["det", "dobj"])).rows() == [
        ("det", 0, 1),
        ("det", 1, 0),
        ("dobj", 0, 0),
        ("dobj", 1, 1),
    ]
    assert links.filter(pl.col("role") == "broad")["gold_links"].to_list() == [None, None]


def test_coreference_names_the_best_head_over_all_mentions(conn: duckdb.DuckDBPyConnection) -> None:
    fill_coreference(conn)  # head 1-2 is best, 4 of 5 coreferent mentions right
    tokens = pl.DataFrame(
        {
            "example_id": [7] * 3,
            "position": [0, 1, 2],
            "token_id": [101, 2002, 102],
            "token": ["[CLS]", "he", "[SEP]"],
            "token_class": ["cls", "other", "sep"],
            "is_special": [True, False, True],
            "segment": [0, 0, 0],
        }
    )
    maps = pl.DataFrame(
        [
            {"example_id": 7, "layer": 1, "head": h, "query": q, "attention": [0.5, 0.25, 0.25], "kept_examples": 2}
            for h in (1, 2)
            for q in range(3)
        ],
        schema_overrides={"layer": pl.Int16, "head": pl.Int16, "query": pl.Int16, "attention": pl.List(pl.Float32)},
    )
    replace_partition(conn, {"tokens": tokens, "head_example_maps": maps}, COREF_MODEL, COREF_CORPUS)
    rows = partition_rows(conn, "clark_head_example_maps", COREF_MODEL)
    # no head summaries in this partition: no Fig. 1 heads; Fig. 5: the coreference head only
    assert rows.select("figure", "role", "layer", "head", "score", "gold_links").unique().rows() == [
        ("Fig. 5", "coreference", 1, 2, pytest.approx(0.8), 5)
    ]
    assert rows.sort("query", "key").select("query_token", "key_token", "attention").rows()[:3] == [
        ("[CLS]", "[CLS]", 0.5),
        ("[CLS]", "he", 0.25),
        ("[CLS]", "[SEP]", 0.25),
    ]
