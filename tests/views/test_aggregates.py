"""Materialized aggregates (agg_* tables, sql/aggregates/): never stale after their facts change,
recomputed by refresh_aggregates and apply_views for facts written otherwise, and the head
rankings' beats_runner_up."""

import duckdb
import polars as pl
import pytest

from dagster_project.compute.models import ModelSpec
from dagster_project.storage import aggregates
from dagster_project.storage.aggregates import stale_aggregates
from dagster_project.storage.model_rows import upsert_model
from dagster_project.storage.partition_writes import refresh_aggregates, replace_partition
from dagster_project.storage.views import apply_views

SPEC = ModelSpec("org--m", "org/m", "/x", "r1", "bert", 2, 2, True)


def _summaries(to_cls: list[float]) -> pl.DataFrame:
    n = len(to_cls)
    return pl.DataFrame(
        {"example_id": range(n), "layer": [1] * n, "head": [1] * n, "n_tokens": [10] * n, "to_cls": to_cls},
        schema_overrides={"layer": pl.Int16, "head": pl.Int16, "n_tokens": pl.Int16, "to_cls": pl.Float32},
    )


def _to_cls(conn: duckdb.DuckDBPyConnection) -> list[tuple]:
    return conn.execute("SELECT corpus, to_cls, n_examples FROM clark_special_tokens ORDER BY corpus").fetchall()


def test_rewriting_a_partition_refreshes_its_results(conn: duckdb.DuckDBPyConnection) -> None:
    upsert_model(conn, SPEC)
    replace_partition(conn, {"head_summaries": _summaries([0.25, 0.75])}, SPEC.model_id, "demo")
    replace_partition(conn, {"head_summaries": _summaries([0.5])}, SPEC.model_id, "other")
    assert _to_cls(conn) == [("demo", pytest.approx(0.5), 2), ("other", pytest.approx(0.5), 1)]
    # the partition is materialized again with other facts: its result follows, the other stays
    replace_partition(conn, {"head_summaries": _summaries([0.125, 0.25, 0.375])}, SPEC.model_id, "demo")
    assert _to_cls(conn) == [("demo", pytest.approx(0.25), 3), ("other", pytest.approx(0.5), 1)]
    replace_partition(conn, {"head_summaries": _summaries([])}, SPEC.model_id, "demo")  # cleared
    assert _to_cls(conn) == [("other", pytest.approx(0.5), 1)]
    assert stale_aggregates(conn) == {}


def test_facts_written_by_sql_are_stale_until_refreshed(conn: duckdb.DuckDBPyConnection) -> None:
    upsert_model(conn, SPEC)
    conn.execute(
        "INSERT INTO head_summaries BY NAME SELECT 'org--m' AS model_id, 'demo' AS corpus, range AS example_id, "
        "1 AS layer, 1 AS head, 10 AS n_tokens, 0.5 + range / 4 AS to_cls, 'copied' AS batch_id FROM range(2)"
    )
    conn.execute(
        "INSERT INTO batches BY NAME SELECT 'head_summaries' AS table_name, 'org--m' AS model_id, 'demo' AS corpus, "
        "'copied' AS batch_id, now()::TIMESTAMP AS written_at, 2 AS n_rows"
    )
    assert stale_aggregates(conn) == {("org--m", "demo"): ["agg_head_attention_means", "agg_pattern_shares"]}
    assert _to_cls(conn) == []
    # one head, a row per weighting (mean_over 'examples' and 'tokens')
    assert refresh_aggregates(conn, SPEC.model_id, "demo", ["agg_head_attention_means"]) == {
        "agg_head_attention_means": 2
    }
    assert _to_cls(conn) == [("demo", pytest.approx(0.625), 2)]
    assert stale_aggregates(conn) == {("org--m", "demo"): ["agg_pattern_shares"]}
    apply_views(conn)  # the views asset's step recomputes what is stale
    assert stale_aggregates(conn) == {}
    with pytest.raises(ValueError, match="not an aggregate table"):
        refresh_aggregates(conn, SPEC.model_id, "demo", ["head_summaries"])


def test_aggregates_computed_by_other_code_are_recomputed(
    conn: duckdb.DuckDBPyConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    upsert_model(conn, SPEC)
    replace_partition(conn, {"head_summaries": _summaries([0.25, 0.75])}, SPEC.model_id, "demo")
    monkeypatch.setattr(aggregates, "aggregate_version", lambda: "changed")
    assert set(stale_aggregates(conn)[("org--m", "demo")]) == {"agg_head_attention_means", "agg_pattern_shares"}
    apply_views(conn)
    assert stale_aggregates(conn) == {}
    assert _to_cls(conn) == [("demo", pytest.approx(0.5), 2)]


def _framenet_links(values: dict[tuple[int, int], list[float]]) -> pl.DataFrame:
    rows = [
        {"example_id": example, "target_start": 0, "target_end": 1, "element_start": 2, "element_end": 3}
        | {"layer": layer, "head": head, "max_attention": value}
        for (layer, head), sentence_values in values.items()
        for example, value in enumerate(sentence_values)
    ]
    return pl.DataFrame(rows, schema_overrides={"layer": pl.Int16, "head": pl.Int16, "max_attention": pl.Float32})


@pytest.mark.parametrize(
    ("values", "beats"),
    [
        # the top head is far ahead on every sentence: its interval clears the runner-up's
        ({(1, 1): [0.9] * 10, (1, 2): [0.1] * 10, (2, 1): [0.05] * 10}, True),
        # the top head's mean 0.5 comes from sentences at 1 and 0: its interval reaches below 0.45
        ({(1, 1): [1.0, 0.0] * 5, (1, 2): [0.45] * 10, (2, 1): [0.05] * 10}, False),
    ],
)
def test_framenet_top_head_beats_the_runner_up_beyond_the_intervals(
    conn: duckdb.DuckDBPyConnection, values: dict, beats: bool
) -> None:
    upsert_model(conn, SPEC)
    replace_partition(conn, {"frame_link_attention": _framenet_links(values)}, SPEC.model_id, "framenet")
    rows = conn.execute(
        "SELECT layer, head, mean_max_attention, ci_low, ci_high, n_examples, beats_runner_up "
        "FROM kovaleva_framenet_heads ORDER BY mean_max_attention DESC"
    ).fetchall()
    top, runner_up, last = rows
    assert (top[0], top[1], top[5]) == (1, 1, 10)
    assert top[3] <= top[2] <= top[4] and runner_up[3] <= runner_up[2] <= runner_up[4]
    assert top[6] is beats and runner_up[6] is None and last[6] is None
    assert (top[3] > runner_up[4]) is beats


def _histogram(weights: list[float], kind: str) -> pl.DataFrame:
    """Example 0, head 1-1, offsets -1..1, two pairs at each offset."""
    extra = {"hta_method": ["exact"] * 3} if kind == "contribution" else {}
    return pl.DataFrame(
        {"example_id": [0] * 3, "kind": [kind] * 3, "scope": ["all"] * 3, "layer": [1] * 3, "head": [1] * 3}
        | {"offset": [-1, 0, 1], "weight_sum": weights, "pair_count": [2, 2, 2]}
        | extra
    )


def test_attention_and_contribution_profiles_follow_their_own_writes(conn: duckdb.DuckDBPyConnection) -> None:
    """Both kinds sum into one aggregate; a write of either table recomputes it with the other as it is."""
    upsert_model(conn, SPEC)

    def profiles() -> dict[str, list[float]]:
        rows = conn.execute(
            'SELECT kind, list(value ORDER BY "offset") FROM int_position_profiles GROUP BY kind'
        ).fetchall()
        return dict(rows)

    replace_partition(conn, {"position_histograms": _histogram([1.0, 0.5, 0.5], "attention")}, SPEC.model_id, "demo")
    replace_partition(
        conn, {"contribution_histograms": _histogram([0.2, 1.2, 0.6], "contribution")}, SPEC.model_id, "demo"
    )
    assert profiles() == {"attention": pytest.approx([0.5, 0.25, 0.25]), "contribution": pytest.approx([0.1, 0.6, 0.3])}
    replace_partition(conn, {"position_histograms": _histogram([0.5, 1.0, 0.5], "attention")}, SPEC.model_id, "demo")
    assert profiles() == {"attention": pytest.approx([0.25, 0.5, 0.25]), "contribution": pytest.approx([0.1, 0.6, 0.3])}
    (scaled,) = conn.execute(
        'SELECT list(value_max_normalized ORDER BY "offset") FROM pascual_contribution_histograms'
    ).fetchone()
    assert scaled == pytest.approx([1 / 6, 1.0, 0.5])
