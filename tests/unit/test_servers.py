"""The start-up wait of the test servers (tests/servers.py): a readiness signal polled against a
deadline that stretches with the machine's load, and a failure that says why."""

import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import servers
from tests.servers import MAX_STRETCH, ServerUnavailable, load_factor, stretched, wait_until_ready


def test_load_factor_is_the_load_per_core_and_at_least_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(servers.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(servers.os, "getloadavg", lambda: (8.0, 1.0, 1.0))
    assert load_factor() == 4.0
    assert stretched(60) == 240.0
    monkeypatch.setattr(servers.os, "getloadavg", lambda: (50.0, 1.0, 1.0))
    assert stretched(60) == 60 * MAX_STRETCH
    monkeypatch.setattr(servers.os, "getloadavg", lambda: (0.5, 1.0, 1.0))
    assert load_factor() == 1.0


def test_returns_the_first_ready_value() -> None:
    answers = iter([None, None, "loaded"])
    assert wait_until_ready(lambda: next(answers), what="a server", quiet_seconds=5, interval=0.01) == "loaded"


def test_the_deadline_stretches_with_the_load(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(servers, "load_factor", lambda: 4.0)
    start = time.monotonic()
    with pytest.raises(ServerUnavailable, match=r"a server was not ready: timed out after .* \(deadline 0.2 s"):
        wait_until_ready(lambda: None, what="a server", quiet_seconds=0.2, interval=0.01)
    assert time.monotonic() - start >= 0.8  # 0.2 quiet seconds at 4x the load


def test_the_stretch_is_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(servers, "load_factor", lambda: 1000.0)
    start = time.monotonic()
    with pytest.raises(ServerUnavailable, match="timed out"):
        wait_until_ready(lambda: None, what="a server", quiet_seconds=0.1, interval=0.01)
    waited = time.monotonic() - start
    assert 0.1 * MAX_STRETCH <= waited < 0.1 * 1000  # at the cap, far before the unstretched deadline


def test_a_process_that_exits_fails_at_once_with_its_log(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("boot\nport already in use\n")
    process = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    process.wait()
    start = time.monotonic()
    with pytest.raises(ServerUnavailable, match=r"(?s)exited with code 3 .*port already in use"):
        wait_until_ready(lambda: None, what="a server", quiet_seconds=60, process=process, log=log)
    assert time.monotonic() - start < 30
