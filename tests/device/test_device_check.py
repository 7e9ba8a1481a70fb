"""bench/device_check.py: its comparison of a device's results with the CPU's, and one run of the whole
check with tiny encoders on the best device here (the CPU where there is no GPU)."""

import math
import os
import re
import subprocess
import sys

import polars as pl
import pytest
import torch

from bench.device_check import frame_difference, result_difference, scaled_difference
from dagster_project.settings import PROJECT_ROOT


def test_scaled_difference_is_relative_to_values_above_one() -> None:
    expected = torch.tensor([0.5, -4.0, 2.0])
    assert scaled_difference(expected, torch.tensor([0.75, -4.0, 2.0])) == pytest.approx(0.25 / 4.0)
    assert scaled_difference(torch.tensor([0.1, 0.2]), torch.tensor([0.1, 0.5])) == pytest.approx(0.3)
    assert math.isnan(scaled_difference(torch.tensor([1.0, float("nan")]), torch.tensor([1.0, 2.0])))
    assert math.isnan(scaled_difference(torch.ones(2), torch.ones(3)))


def test_frames_are_compared_row_by_row_whatever_their_order() -> None:
    expected = pl.DataFrame({"head": [1, 2], "mass": [0.5, 3.0], "histogram": [[0.25, 0.75], [1.0, 0.0]]})
    shuffled = expected.reverse()
    assert frame_difference(expected, shuffled) == 0.0
    moved = shuffled.with_columns(histogram=pl.Series([[1.0, 0.0], [0.25, 0.35]]))
    assert frame_difference(expected, moved) == pytest.approx(0.4)
    assert math.isnan(frame_difference(expected, expected.with_columns(head=pl.Series([1, 3]))))
    got = {"rows": shuffled.with_columns(mass=pl.Series([3.0, 0.5 + 2e-5])), "loss": 1.0}
    assert result_difference({"rows": expected, "loss": 1.0}, got) == pytest.approx(2e-5 / 3.0)


@pytest.mark.device_check
def test_the_tiny_check_passes_and_ends_with_its_three_lines() -> None:
    environment = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
    run = subprocess.run(
        [sys.executable, "-m", "bench.device_check", "--tiny"],
        cwd=PROJECT_ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    last = run.stdout.strip().splitlines()[-3:]
    assert re.fullmatch(r"worst fact-pass ratio \d+\.\d\d", last[0]), last
    assert re.fullmatch(r"HTA exact s/example \d+\.\d\d \(tiny, (8|64) pieces\)", last[1]), last
    assert last[2] == "protocols failing 0", run.stdout[-3000:]
    protocol_lines = [line for line in run.stdout.splitlines() if line.startswith("tiny ") and line.endswith(" ok")]
    assert len(protocol_lines) == 10, run.stdout
