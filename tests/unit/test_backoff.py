"""The out-of-memory back-off: halving, its floor, its log lines and its error."""

import logging

import pytest
import torch

from dagster_project.compute.backoff import BackOff, PassOutOfMemory

BACKOFF = BackOff("Test pass", "rows per batch", "Lower rows.", torch.device("cpu"), smallest=3)


def test_a_try_that_runs_out_of_memory_is_retried_at_half_down_to_the_smallest(caplog):
    tried = []

    def attempt(size: int) -> int:
        tried.append(size)
        if size > 4:
            raise torch.OutOfMemoryError(f"{size} rows do not fit")
        return 10 * size

    with caplog.at_level(logging.WARNING):
        assert BACKOFF.retrying(attempt, 37) == 40
    assert tried == [37, 18, 9, 4]
    assert [record.getMessage() for record in caplog.records] == [
        "Test pass: out of memory on cpu at 37 rows per batch, retrying at 18",
        "Test pass: out of memory on cpu at 18 rows per batch, retrying at 9",
        "Test pass: out of memory on cpu at 9 rows per batch, retrying at 4",
    ]
    assert BACKOFF.halved(5, "full") == 3  # half, but not under the smallest


def test_at_the_smallest_size_the_error_names_what_to_lower():
    def never_fits(size: int) -> None:
        raise torch.OutOfMemoryError(f"{size} rows do not fit")

    with pytest.raises(PassOutOfMemory) as raised:
        BACKOFF.retrying(never_fits, 6)
    assert str(raised.value) == (
        "Test pass: out of memory on cpu even at its smallest size (rows per batch: 3): 3 rows do not fit. Lower rows."
    )
    assert raised.value.__cause__ is None  # the failed try's traceback, and the tensors it holds, are let go


def test_other_errors_pass_through():
    def broken(size: int) -> None:
        raise ValueError("not memory")

    with pytest.raises(ValueError, match="not memory"):
        BACKOFF.retrying(broken, 8)
