"""The frame worker (compute/host_frames.py): frames built beside the pass, in place when it is timed, the
same rows either way, and a forked process's own worker."""

import multiprocessing
import threading

import polars as pl
import pytest

from dagster_project.compute.attention_pass import extract_attention_facts
from dagster_project.compute.fact_kinds import FACT_KINDS
from dagster_project.compute.host_frames import built_beside
from dagster_project.compute.models import LoadedEncoder
from dagster_project.compute.pass_timings import PassTimings, timing

DENSE_KINDS = [FACT_KINDS[name] for name in ("head_summaries", "position_histograms", "head_example_maps")]


def test_frames_are_built_beside_the_pass_and_in_place_when_it_is_timed(encoder: LoadedEncoder) -> None:
    assert built_beside(threading.current_thread).result() is not threading.current_thread()
    with timing(PassTimings(encoder.compute.device)):
        assert built_beside(threading.current_thread).result() is threading.current_thread()


def test_a_failed_build_raises_where_its_frame_is_taken() -> None:
    future = built_beside(pl.concat, [])
    with pytest.raises(ValueError, match="cannot concat empty list"):
        future.result()


def test_the_rows_are_the_same_built_beside_or_in_place(encoder: LoadedEncoder, demo_tokens: pl.DataFrame) -> None:
    beside = extract_attention_facts(encoder, demo_tokens, DENSE_KINDS, batch_tokens=256)
    in_place = extract_attention_facts(
        encoder, demo_tokens, DENSE_KINDS, batch_tokens=256, timings=PassTimings(encoder.compute.device)
    )
    for table in ("head_summaries", "position_histograms", "head_example_maps"):
        assert beside.tables[table].height > 0, table
        assert beside.tables[table].equals(in_place.tables[table]), table


def _built_in_child(results: multiprocessing.Queue) -> None:
    results.put(built_beside(sum, [1, 2, 3]).result(timeout=30))


def test_a_forked_process_starts_its_own_worker() -> None:
    built_beside(sum, []).result()  # this process's worker has started
    fork = multiprocessing.get_context("fork")
    results = fork.Queue()
    child = fork.Process(target=_built_in_child, args=(results,))
    child.start()
    child.join(60)
    assert child.exitcode == 0
    assert results.get(timeout=5) == 6
