"""The weighting views (docs/methods.md §3.9) on fixture rows with hand-computed numbers:
compare_weightings_special_tokens, compare_weightings_dependency_heads, compare_weightings_value_norms,
compare_weightings_faithfulness, compare_weightings_hta_agreement;
and the views written before the weightings, which keep showing the attention rows only."""

import dataclasses
import math
import statistics

import duckdb
import numpy as np
import polars as pl
import pytest

from dagster_project.compute import bootstrap
from dagster_project.compute.models import ModelSpec
from dagster_project.storage.batches import partition_rows
from dagster_project.storage.model_rows import upsert_model
from dagster_project.storage.partition_writes import replace_partition

SPEC = ModelSpec("org--m", "org/m", "/x", "r1", "bert", 1, 2, True)
N_EXAMPLES = 100
# "the dog saw cats" (det 0->1, nsubj 1->2, root 2, obj 3->2), and in example 0 a fifth word (case 4->3).
EDGES = [(0, 1, "det", "DET"), (1, 2, "nsubj", "NOUN"), (2, None, "root", "VERB"), (3, 2, "obj", "NOUN")]
# Most-attended other word of words 0..4 per (weighting, head). Attention: head 1 points every dependent
# at its head, head 2 at the previous word (word 0: the next). Norm: head 1 points word 0 at the verb,
# head 2 as attention's. Rollout (head 0): the verb for words 0 and 1, word 1 for the verb, word 2 for word 3.
TARGETS = {
    ("attention", 1): [1, 2, 1, 2, 3],
    ("attention", 2): [1, 0, 1, 2, 3],
    ("norm", 1): [2, 2, 1, 2, 3],
    ("norm", 2): [1, 0, 1, 2, 3],
    ("rollout", 0): [2, 2, 1, 2, 3],
}


def _dependency_fixture(conn: duckdb.DuckDBPyConnection, weightings: tuple[str, ...]) -> None:
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
            {
                "example_id": e,
                "word_index": w,
                "layer": 1,
                "head": head,
                "target_word": targets[w],
                "word_mode": "mean",
                "weighting": weighting,
            }
            for (weighting, head), targets in TARGETS.items()
            if weighting in weightings
            for e in range(N_EXAMPLES)
            for w in range(5 if e == 0 else 4)
        ]
    )
    replace_partition(conn, {"dependencies": dependencies, "relation_hits": hits}, SPEC.model_id, "ud")


def test_other_weightings_leave_clark_table_1_as_it_was(conn: duckdb.DuckDBPyConnection) -> None:
    _dependency_fixture(conn, ("attention",))
    alone = partition_rows(conn, "clark_dependency_heads", SPEC.model_id).sort("relation")
    hits = conn.execute("SELECT count(*) FROM stg_relation_hits").fetchone()
    _dependency_fixture(conn, ("attention", "norm", "rollout"))
    assert partition_rows(conn, "clark_dependency_heads", SPEC.model_id).sort("relation").equals(alone)
    assert conn.execute("SELECT count(*) FROM stg_relation_hits").fetchone() == hits
    assert conn.execute("SELECT DISTINCT weighting FROM stg_relation_hits").fetchall() == [("attention",)]


def test_best_dependency_head_per_weighting(conn: duckdb.DuckDBPyConnection) -> None:
    _dependency_fixture(conn, ("attention", "norm", "rollout"))
    rows = {
        (row["weighting"], row["relation"]): row
        for row in partition_rows(conn, "compare_weightings_dependency_heads", SPEC.model_id).to_dicts()
    }
    assert {relation for _, relation in rows} == {"All", "det", "nsubj", "dobj"}  # 'case (UD)' etc.: 1 < 100 edges
    clark = {row["relation"]: row for row in partition_rows(conn, "clark_dependency_heads", SPEC.model_id).to_dicts()}
    for relation, row in clark.items():  # attention's best heads are Table 1's (of 100 edges or more)
        if row["n"] < 100:
            continue
        got = rows["attention", relation]
        assert (got["layer"], got["head"], got["direction"], got["n"]) == (
            row["layer"],
            row["head"],
            row["direction"],
            row["n"],
        )
        assert got["accuracy"] == pytest.approx(row["accuracy"])
        assert got["baseline_accuracy"] == pytest.approx(row["baseline_accuracy"])
    # det: attention and norm both 1.0 with head 2 (norm's head 1 points the determiner at the verb);
    # rollout never picks the noun from the determiner, nor the determiner from the noun.
    assert (rows["norm", "det"]["head"], rows["norm", "det"]["accuracy"]) == (2, 1.0)
    assert (rows["rollout", "det"]["head"], rows["rollout", "det"]["accuracy"]) == (0, 0.0)
    # All (301 edges): attention's head 1 gets all of them; norm's head 1 all but the 100 det edges;
    # rollout gets nsubj, obj and case: 100 + 100 + 1.
    assert rows["attention", "All"]["accuracy"] == pytest.approx(1.0)
    assert (rows["norm", "All"]["head"], rows["norm", "All"]["accuracy"]) == (1, pytest.approx(201 / 301))
    assert rows["rollout", "All"]["accuracy"] == pytest.approx(201 / 301)
    assert {row["n"] for (_, relation), row in rows.items() if relation == "All"} == {301}


def _summaries(weighting: str, head: int, to_cls: list[float], to_sep: list[float]) -> pl.DataFrame:
    """Two examples of one (weighting, layer 1, head); every other mass 0.1, entropy 1 + to_cls."""
    return pl.DataFrame(
        {
            "example_id": [0, 1],
            "layer": [1, 1],
            "head": [head, head],
            "n_tokens": [10, 30],
            **{name: [0.1, 0.1] for name in ("to_punct", "to_self", "to_prev", "to_next", "sep_to_sep")},
            "to_cls": to_cls,
            "to_sep": to_sep,
            "entropy": [1 + value for value in to_cls],
            "cls_entropy": [1.0, 1.0],
            "row_sum_error": [0.0, 0.0],
            "pattern": ["vertical", "heterogeneous"],
            "weighting": [weighting, weighting],
        },
        schema_overrides={"layer": pl.Int16, "head": pl.Int16, "n_tokens": pl.Int16},
    )


def test_special_token_shares_per_weighting_and_clark_fig_2_unchanged(conn: duckdb.DuckDBPyConnection) -> None:
    upsert_model(conn, SPEC)
    attention = pl.concat(
        [_summaries("attention", 1, [0.2, 0.4], [0.5, 0.3]), _summaries("attention", 2, [0.0, 0.2], [0.1, 0.1])]
    )
    replace_partition(conn, {"head_summaries": attention}, SPEC.model_id, "demo")
    figure = partition_rows(conn, "clark_special_tokens", SPEC.model_id)
    shares = partition_rows(conn, "kovaleva_pattern_shares", SPEC.model_id)
    weighted = pl.concat(
        [
            attention,
            _summaries("norm", 1, [0.1, 0.1], [0.1, 0.3]),
            _summaries("norm", 2, [0.0, 0.0], [0.0, 0.2]),
            _summaries("rollout", 0, [0.6, 0.8], [0.2, 0.0]),
        ]
    )
    replace_partition(conn, {"head_summaries": weighted}, SPEC.model_id, "demo")
    assert partition_rows(conn, "clark_special_tokens", SPEC.model_id).sort("head").equals(figure.sort("head"))
    assert partition_rows(conn, "kovaleva_pattern_shares", SPEC.model_id).sort("pattern").equals(shares.sort("pattern"))
    rows = {
        row["weighting"]: row
        for row in partition_rows(conn, "compare_weightings_special_tokens", SPEC.model_id).to_dicts()
    }
    assert set(rows) == {"attention", "norm", "rollout"}
    # attention: head 1 means (0.3 to [CLS], 0.4 to [SEP]), head 2 (0.1, 0.1); the layer: their mean
    assert rows["attention"]["to_cls"] == pytest.approx(0.2)
    assert rows["attention"]["to_sep"] == pytest.approx(0.25)
    assert rows["attention"]["to_cls_sep"] == pytest.approx(0.45)
    assert rows["attention"]["entropy"] == pytest.approx(1.2)
    assert (rows["attention"]["n_heads"], rows["attention"]["n_examples"]) == (2, 2)
    # norm: head 1 (0.1, 0.2), head 2 (0, 0.1): [CLS] + [SEP] 0.2
    assert rows["norm"]["to_cls_sep"] == pytest.approx(0.2)
    assert rows["norm"]["to_punct"] == pytest.approx(0.1)
    # rollout: its one map per layer, (0.7, 0.1)
    assert (rows["rollout"]["to_cls"], rows["rollout"]["to_sep"]) == (pytest.approx(0.7), pytest.approx(0.1))
    assert rows["rollout"]["n_heads"] == 1
    assert rows["rollout"]["relative_depth"] == pytest.approx(0.5)


def _histogram(weighting: str, head: int, sums: list[float]) -> pl.DataFrame:
    """One head of layer 1, example 0, over offsets -1, 0, 1 with pair counts 2, 4, 2 (flat grain)."""
    return pl.DataFrame(
        {
            "example_id": [0] * 3,
            "scope": ["all"] * 3,
            "layer": [1] * 3,
            "head": [head] * 3,
            "offset": [-1, 0, 1],
            "weight_sum": sums,
            "pair_count": [2, 4, 2],
            "weighting": [weighting] * 3,
        }
    )


def test_histograms_keep_attention_in_stg_and_every_weighting_in_stg_weighted(conn: duckdb.DuckDBPyConnection) -> None:
    upsert_model(conn, SPEC)
    attention = pl.concat([_histogram("attention", 1, [0.5, 1.0, 0.5]), _histogram("attention", 2, [1.0, 1.0, 0.0])])
    replace_partition(conn, {"position_histograms": attention}, SPEC.model_id, "demo")
    query = 'SELECT head, "offset", weight_sum, pair_count FROM {} ORDER BY ALL'
    alone = conn.execute(query.format("stg_position_histograms")).fetchall()
    centers = partition_rows(conn, "pascual_center_of_mass", SPEC.model_id)
    # rollout's head 0 comes first in its (example, scope), so its packed row holds the pair counts
    weighted = pl.concat([attention, _histogram("rollout", 0, [0.0, 1.0, 1.0]), _histogram("norm", 1, [0.2, 1.6, 0.2])])
    replace_partition(conn, {"position_histograms": weighted}, SPEC.model_id, "demo")
    assert conn.execute(query.format("stg_position_histograms")).fetchall() == alone
    assert partition_rows(conn, "pascual_center_of_mass", SPEC.model_id).equals(centers)
    rows = conn.execute(
        'SELECT weighting, head, list(pair_count ORDER BY "offset"), '
        'list(round(weight_sum::DOUBLE, 5) ORDER BY "offset") '
        "FROM stg_weighted_position_histograms GROUP BY ALL ORDER BY ALL"
    ).fetchall()
    assert rows == [
        ("attention", 1, [2, 4, 2], [0.5, 1.0, 0.5]),
        ("attention", 2, [2, 4, 2], [1.0, 1.0, 0.0]),
        ("norm", 1, [2, 4, 2], [0.2, 1.6, 0.2]),
        ("rollout", 0, [2, 4, 2], [0.0, 1.0, 1.0]),
    ]
    # kind is what the table measures (the maps' mass), whatever the weighting of the maps
    assert conn.execute("SELECT DISTINCT kind FROM stg_weighted_position_histograms").fetchall() == [("attention",)]


def test_value_norms_per_layer_and_token_class(conn: duckdb.DuckDBPyConnection) -> None:
    upsert_model(conn, SPEC)
    norms = pl.DataFrame(
        {
            "example_id": [0, 0, 1, 1, 0, 0],
            "layer": [1] * 6,
            "head": [1, 1, 1, 1, 2, 2],
            "token_class": ["cls", "content", "cls", "content", "cls", "content"],
            "mean_norm": [1.0, 4.0, 2.0, 3.0, 0.5, 5.0],
            "n_tokens": [2, 6, 2, 10, 2, 6],
        }
    )
    replace_partition(conn, {"value_norms": norms}, SPEC.model_id, "demo")
    rows = {
        row["token_class"]: row
        for row in partition_rows(conn, "compare_weightings_value_norms", SPEC.model_id).to_dicts()
    }
    # token-weighted over heads and examples: cls (2*1 + 2*2 + 2*0.5) / 6, content (24 + 30 + 30) / 22
    assert rows["cls"]["mean_norm"] == pytest.approx(7 / 6)
    assert rows["content"]["mean_norm"] == pytest.approx(84 / 22)
    assert (rows["content"]["n_examples"], rows["cls"]["n_tokens"]) == (2, 3)


def test_faithfulness_per_weighting_with_fisher_z_intervals(conn: duckdb.DuckDBPyConnection) -> None:
    upsert_model(conn, SPEC)
    correlations = {
        ("globenc", "rolled_out"): [0.5, 0.7, 0.9],
        ("attention", "rolled_out"): [-0.2, 0.2, None],
        ("rollout", "rolled_out"): [1.0, None, None],
        ("globenc", "per_layer"): [0.1, 0.2, 0.3],
    }
    rows = pl.DataFrame(
        [
            {"example_id": e, "weighting": w, "aggregation": a, "spearman": rho, "n_tokens": 9, "predicted_label": 1}
            for (w, a), values in correlations.items()
            for e, rho in enumerate(values)
        ],
        schema_overrides={"spearman": pl.Float64},
    )
    replace_partition(conn, {"saliency_correlations": rows}, SPEC.model_id, "glue_sst2")
    found = partition_rows(conn, "compare_weightings_faithfulness", SPEC.model_id)
    # per aggregation, by mean correlation
    assert found.select("aggregation", "weighting").rows() == [
        ("per_layer", "globenc"),
        ("rolled_out", "attention"),
        ("rolled_out", "globenc"),
        ("rolled_out", "rollout"),
    ]
    assert found.filter(pl.col("aggregation") == "per_layer")["mean_spearman"].item() == pytest.approx(0.2)
    by_weighting = {row["weighting"]: row for row in found.filter(pl.col("aggregation") == "rolled_out").to_dicts()}
    z = [math.atanh(rho) for rho in correlations["globenc", "rolled_out"]]  # 0.5493, 0.8673, 1.4722
    margin = 1.959963984540054 * statistics.stdev(z) / math.sqrt(3)
    globenc = by_weighting["globenc"]
    assert (globenc["mean_spearman"], globenc["n_examples"]) == (pytest.approx(0.7), 3)
    assert globenc["spearman"] == pytest.approx(math.tanh(statistics.mean(z)))  # 0.745
    assert globenc["ci_low"] == pytest.approx(math.tanh(statistics.mean(z) - margin))  # 0.407
    assert globenc["ci_high"] == pytest.approx(math.tanh(statistics.mean(z) + margin))  # 0.904
    attention = by_weighting["attention"]  # the null correlation left out: two examples, symmetric around 0
    assert attention["n_examples"] == 2 and attention["mean_spearman"] == pytest.approx(0.0)
    assert attention["ci_low"] == pytest.approx(-attention["ci_high"]) and attention["ci_high"] > 0.2
    rollout = by_weighting["rollout"]  # one example of correlation 1: a mean, no interval
    assert (rollout["mean_spearman"], rollout["ci_low"], rollout["n_examples"]) == (1.0, None, 1)
    assert rollout["spearman"] == pytest.approx(0.999999)  # clamped off 1 before atanh


def test_hta_agreement_per_weighting_and_layer_with_bootstrap_intervals(conn: duckdb.DuckDBPyConnection) -> None:
    spec = dataclasses.replace(SPEC, n_layers=2)
    upsert_model(conn, spec)
    # per (weighting, aggregation, layer) the examples' mean row Spearman and rows; example 3 of globenc
    # per layer has no correlation
    agreement = {
        ("globenc", "per_layer", 1): ([0.9, 0.8, 0.7, None], [10, 12, 9, 0]),
        ("globenc", "per_layer", 2): ([0.6, 0.5, 0.4, 0.3], [10, 12, 9, 8]),
        ("attention", "per_layer", 1): ([0.1, -0.3, 0.2, 0.4], [10, 12, 9, 8]),
        ("globenc", "rolled_out", 2): ([0.2, 0.1, 0.0, -0.1], [10, 12, 9, 8]),
    }
    rows = pl.DataFrame(
        [
            {
                "example_id": e,
                "layer": layer,
                "weighting": weighting,
                "aggregation": aggregation,
                "spearman": rho,
                "n_rows": n,
                "hta_method": "hutchpp(16,8,bf16)",
            }
            for (weighting, aggregation, layer), (values, counts) in agreement.items()
            for e, (rho, n) in enumerate(zip(values, counts, strict=True))
        ],
        schema_overrides={"spearman": pl.Float32, "n_rows": pl.Int16},
    )
    replace_partition(conn, {"hta_agreement": rows}, spec.model_id, "xnli_en")
    found = {
        (row["weighting"], row["aggregation"], row["layer"]): row
        for row in partition_rows(conn, "compare_weightings_hta_agreement", spec.model_id).to_dicts()
    }
    assert set(found) == set(agreement)
    globenc = found[("globenc", "per_layer", 1)]
    assert (globenc["spearman"], globenc["n_examples"], globenc["n_rows"]) == (pytest.approx(0.8), 3, 31)
    assert (globenc["relative_depth"], found[("globenc", "per_layer", 2)]["relative_depth"]) == (0.25, 0.75)
    assert found[("globenc", "rolled_out", 2)]["spearman"] == pytest.approx(0.05)  # apart from the per-layer 0.45
    assert found[("attention", "per_layer", 1)]["spearman"] == pytest.approx(0.1)  # (0.1 - 0.3 + 0.2 + 0.4) / 4
    assert found[("attention", "per_layer", 1)]["hta_method"] == "hutchpp(16,8,bf16)"
    # the interval: a plain loop over 1,000 seeded resamples of the 4 examples (bootstrap.SEED), each
    # resample's mean over the examples it drew that have a correlation (a resample of none has no mean),
    # and the 2.5th and 97.5th percentiles of those means
    draws = np.random.default_rng(bootstrap.SEED).integers(0, 4, size=(bootstrap.N_RESAMPLES, 4))
    for key, (values, _) in agreement.items():
        drawn_values = [[values[e] for e in drawn if values[e] is not None] for drawn in draws]
        low, high = np.quantile([np.mean(drawn) for drawn in drawn_values if drawn], [0.025, 0.975])
        assert (found[key]["ci_low"], found[key]["ci_high"]) == (pytest.approx(low), pytest.approx(high)), key
    assert 0.7 - 1e-6 <= globenc["ci_low"] < 0.8 < globenc["ci_high"] <= 0.9 + 1e-6  # float32 facts
