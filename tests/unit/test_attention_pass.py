"""The attention pass as a whole on a tiny random BERT: out-of-memory retries and phase timings."""

import logging
import re

import polars as pl
import pytest

from dagster_project.compute.attention_pass import extract_attention_facts
from dagster_project.compute.backoff import PassOutOfMemory
from dagster_project.compute.fact_kinds import FACT_KINDS
from dagster_project.compute.pass_timings import PHASES, PassTimings
from tests.out_of_memory import out_of_memory_above

KINDS = [FACT_KINDS[name] for name in ("head_summaries", "position_histograms", "head_distances")]


def sorted_tables(tables: dict[str, pl.DataFrame]) -> dict[str, pl.DataFrame]:
    keys = {
        "head_summaries": ["example_id", "layer", "head"],
        "position_histograms": ["example_id", "scope", "layer", "head"],
    }
    keys["head_distances"] = ["layer_a", "head_a", "layer_b", "head_b"]
    return {name: frame.sort(keys[name]) for name, frame in tables.items()}


def test_a_pass_out_of_memory_starts_again_at_half_the_batch(encoder, demo_tokens, caplog) -> None:
    limit = 150  # the 12 demo pairs take 288 padded positions in one batch
    with caplog.at_level(logging.WARNING), out_of_memory_above(encoder.model, limit) as tried:
        retried = extract_attention_facts(encoder, demo_tokens, KINDS, batch_tokens=1024)
    warnings = [record.getMessage() for record in caplog.records if "out of memory" in record.getMessage()]
    steps = [
        tuple(map(int, re.search(r"at (\d+) batch_tokens, retrying at (\d+)", text).groups())) for text in warnings
    ]
    budgets = [tried_at for tried_at, _ in steps]
    assert budgets[:2] == [1024, 512] and budgets == [1024 // 2**step for step in range(len(budgets))]
    final = budgets[-1] // 2
    assert all(retried_at == tried_at // 2 for tried_at, retried_at in steps)
    assert max(tried) == 288 and max(tried[-3:]) <= limit  # the last attempt's batches fit
    reference = extract_attention_facts(encoder, demo_tokens, KINDS, batch_tokens=final)
    expected, got = sorted_tables(reference.tables), sorted_tables(retried.tables)
    for name in expected:
        assert got[name].equals(expected[name]), name
    assert retried.n_examples == reference.n_examples == demo_tokens["example_id"].n_unique()


def test_a_pass_that_does_not_fit_one_example_says_what_to_change(encoder, demo_tokens) -> None:
    longest = demo_tokens.group_by("example_id").len()["len"].max()
    with out_of_memory_above(encoder.model, None), pytest.raises(PassOutOfMemory) as raised:
        extract_attention_facts(encoder, demo_tokens, KINDS, batch_tokens=4 * longest)
    message = str(raised.value)
    assert f"(batch_tokens: {longest})" in message and f"longest example has {longest} pieces" in message
    assert "max_len" in message and "ATTN_DTYPE=bfloat16" in message and "Nothing was written" in message


def test_timed_phases_add_up_to_the_pass(encoder, demo_tokens) -> None:
    timings = PassTimings(encoder.compute.device)
    facts = extract_attention_facts(encoder, demo_tokens, KINDS, batch_tokens=256, timings=timings)
    assert set(timings.seconds) == set(PHASES)
    assert all(seconds > 0 for seconds in timings.seconds.values()), timings.seconds
    # exclusive phases: together they are the pass's time, less what lies outside every phase
    assert 0.8 * facts.seconds < sum(timings.seconds.values()) <= facts.seconds
    assert sum(timings.shares().values()) == pytest.approx(1.0)
