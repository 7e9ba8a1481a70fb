"""tangent_squared_norms a chunk at a time: the same norms as all tangents at once, whatever the
chunk; chunks halved on running out of memory; peak memory bounded by one chunk's outputs."""

import json
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from torch.func import jvp, vmap

from dagster_project.compute.backoff import PassOutOfMemory
from dagster_project.compute.pascual import hta_estimators
from dagster_project.compute.pascual.hta_estimators import (
    HOST_CHUNK_BYTES,
    MAX_CHUNK,
    TANGENT_OVERHEAD,
    UnitTangents,
    chunk_for_memory,
    tangent_squared_norms,
)

TOKENS, WIDTH = 4, 6  # 24 unit tangents, 6 per input token


def _all_at_once(function, primal: torch.Tensor, tangents: torch.Tensor, per_token: int) -> torch.Tensor:
    """The reference: every tangent's output kept (one vmap over all of them), then squared and summed."""
    outputs = vmap(lambda tangent: jvp(function, (primal,), (tangent,))[1])(tangents)
    return (outputs * outputs).sum(-1).view(-1, per_token, *outputs.shape[1:-1]).sum(1)


@pytest.fixture(scope="module")
def contexts():
    """A small nonlinear stand-in for an encoder: x (1, n, D) -> (L=3, n, H=3, dh=2)."""
    generator = torch.Generator().manual_seed(0)
    mixing = torch.randn(3, TOKENS, TOKENS, generator=generator) / 2
    weights = torch.randn(3, WIDTH, WIDTH, generator=generator) / 2
    return lambda x: torch.tanh(mixing @ x[0] @ weights).view(3, TOKENS, 3, 2)


@pytest.fixture(scope="module")
def primal() -> torch.Tensor:
    return torch.randn(1, TOKENS, WIDTH, generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("chunk_size", [1, 4, 7, 12, 24, None])  # 4 and 7 straddle tokens; None: from memory
def test_chunked_norms_equal_all_tangents_at_once(contexts, primal, chunk_size):
    unit = UnitTangents((1, TOKENS, WIDTH))
    reference = _all_at_once(contexts, primal, torch.eye(TOKENS * WIDTH).view(-1, 1, TOKENS, WIDTH), WIDTH)
    jacobian = torch.autograd.functional.jacobian(contexts, primal)[..., 0, :, :]  # (L, j, H, dh, i, D)
    torch.testing.assert_close(reference, jacobian.pow(2).sum((3, 5)).permute(3, 0, 1, 2))
    chunked = tangent_squared_norms(contexts, primal, unit, WIDTH, chunk_size=chunk_size)
    assert chunked.shape == (TOKENS, 3, TOKENS, 3)
    torch.testing.assert_close(chunked, reference, atol=1e-6, rtol=1e-5)
    # probes: 5 per token, as the estimators group them
    probes = torch.randn(TOKENS * 5, 1, TOKENS, WIDTH, generator=torch.Generator().manual_seed(2))
    torch.testing.assert_close(
        tangent_squared_norms(contexts, primal, probes, 5, chunk_size=chunk_size),
        _all_at_once(contexts, primal, probes, 5),
        atol=1e-6,
        rtol=1e-5,
    )


def test_unit_tangents_are_rows_of_the_identity():
    unit = UnitTangents((1, 3, 4))
    assert len(unit) == 12
    torch.testing.assert_close(unit[2:7], torch.eye(12)[2:7].view(5, 1, 3, 4))
    torch.testing.assert_close(unit[10:99], torch.eye(12)[10:].view(2, 1, 3, 4))


def _running_out_above(monkeypatch: pytest.MonkeyPatch, limit: int) -> list[int]:
    """Make every jvp call of more than `limit` tangents run out of memory; returns the sizes tried."""
    tried: list[int] = []
    real = hta_estimators._jvp_outputs

    def limited(function, primal, tangents, bf16):
        tried.append(len(tangents))
        if len(tangents) > limit:
            raise torch.OutOfMemoryError(f"Tried to allocate {len(tangents)} tangents' outputs")
        return real(function, primal, tangents, bf16)

    monkeypatch.setattr(hta_estimators, "_jvp_outputs", limited)
    return tried


def test_out_of_memory_halves_the_chunk_and_keeps_the_norms(contexts, primal, monkeypatch, caplog):
    reference = _all_at_once(contexts, primal, torch.eye(TOKENS * WIDTH).view(-1, 1, TOKENS, WIDTH), WIDTH)
    tried = _running_out_above(monkeypatch, 5)
    with caplog.at_level(logging.WARNING, logger="dagster_project.compute.backoff"):
        norms = tangent_squared_norms(contexts, primal, UnitTangents((1, TOKENS, WIDTH)), WIDTH, chunk_size=20)
    torch.testing.assert_close(norms, reference, atol=1e-6, rtol=1e-5)
    assert tried == [20, 10, 5, 5, 5, 5, 4]  # 24 tangents: 20 fails, 10 fails, then chunks of 5
    assert [record.name for record in caplog.records] == ["dagster_project.compute.backoff"] * 2
    assert [record.getMessage() for record in caplog.records] == [
        "HTA input contributions: out of memory on cpu at 20 tangents per jvp call, retrying at 10",
        "HTA input contributions: out of memory on cpu at 10 tangents per jvp call, retrying at 5",
    ]


def test_out_of_memory_at_one_tangent_says_what_to_change(contexts, primal, monkeypatch):
    tried = _running_out_above(monkeypatch, 0)
    with pytest.raises(PassOutOfMemory) as raised:
        tangent_squared_norms(contexts, primal, UnitTangents((1, TOKENS, WIDTH)), WIDTH, chunk_size=3)
    assert tried == [3, 1]
    assert str(raised.value) == (
        "HTA input contributions: out of memory on cpu for a 4-token example even at its smallest size "
        "(tangents per jvp call: 1): Tried to allocate 1 tangents' outputs. Lower the corpus max_len (fewer "
        "pieces per example), use an estimator hta_method (hutchpp(r,k) or estimate(k), ',bf16' to halve its "
        "products) instead of exact, or run on a device with more memory."
    )
    with pytest.raises(PassOutOfMemory, match="^HTA input contributions: out of memory on cpu for a 4-token"):
        tangent_squared_norms(contexts, primal, UnitTangents((1, TOKENS, WIDTH)), WIDTH)  # from memory: probe of 1


def test_chunk_from_memory(monkeypatch):
    cpu = torch.device("cpu")
    assert chunk_for_memory(cpu, 2**20) == HOST_CHUNK_BYTES // (2**20 * TANGENT_OVERHEAD) == 32
    assert chunk_for_memory(cpu, 2**40) == 1
    assert chunk_for_memory(cpu, 4) == MAX_CHUNK
    # CUDA: the driver's free memory plus the caching allocator's unused blocks, half of it
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (10 * 2**30, 80 * 2**30))
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device: 3 * 2**30)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device: 1 * 2**30)
    assert chunk_for_memory(torch.device("cuda", 0), 2**20) == 6 * 2**30 // (2**20 * TANGENT_OVERHEAD) == 384


_PEAK = r"""
import json, re, torch
from torch.func import jvp, vmap
from dagster_project.compute.pascual.hta_estimators import UnitTangents, tangent_squared_norms
n, width = 16, 32  # 512 unit tangents, each output 16 x 8192 floats (512 KiB): 256 MiB in all
weight = torch.randn(width, 8192, generator=torch.Generator().manual_seed(0)) / width**0.5
function = lambda x: torch.tanh(x @ weight).view(n, 64, 128)
x = torch.randn(n, width, generator=torch.Generator().manual_seed(1))
tangents = UnitTangents((n, width))

def all_at_once():
    outputs = vmap(lambda tangent: jvp(function, (x,), (tangent,))[1], chunk_size=128)(tangents[:])
    return (outputs * outputs).sum(-1).view(n, width, n, 64).sum(1)

run = {"chunked": lambda: tangent_squared_norms(function, x, tangents, width, chunk_size=8), "all": all_at_once}[MODE]
def peak_kib():  # this process's peak RSS since exec (ru_maxrss would carry over the parent's)
    with open("/proc/self/status") as status:
        return int(re.search(r"VmHWM:\s+(\d+) kB", status.read())[1])

tangent_squared_norms(function, x, tangents[:width], width, chunk_size=8)  # loads the kernels
before = peak_kib()
norms = run()
print(json.dumps({"growth_mib": (peak_kib() - before) / 1024, "sum": float(norms.sum())}))
"""


def _peak_growth(mode: str) -> dict:
    code = f"MODE = {mode!r}\n" + textwrap.dedent(_PEAK)
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).parents[2],
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="reads the peak RSS from /proc/self/status")
def test_peak_memory_is_one_chunk_not_every_output():
    chunked, every = _peak_growth("chunked"), _peak_growth("all")
    assert chunked["sum"] == pytest.approx(every["sum"], rel=1e-5)
    assert every["growth_mib"] > 250  # keeping all 512 outputs: at least their 256 MiB
    assert chunked["growth_mib"] < 40  # 8 tangents' outputs: 4 MiB, plus their tangents and activations
