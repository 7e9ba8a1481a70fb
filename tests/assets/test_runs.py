"""A run killed while it holds the warehouse_writer slot: `reclaim_dead_runs` marks it failed and
frees the slot, so the next writer runs; a live holder is named, not touched; Ctrl-C stops a
run that waits for the slot, and both guards end with their run (cli/recovery.py)."""

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from dagster import DagsterInstance, DagsterRunStatus, RunsFilter

from dagster_project import settings
from dagster_project.cli.recovery import announce_pool_waits, reclaim_dead_runs, stop_on_interrupt
from tests.servers import stretched

# Materializes one pool asset in a fresh process against $DAGSTER_HOME; argv: sleep seconds, guard.
MATERIALIZE = """
import sys, time
from contextlib import ExitStack
from dagster import DagsterInstance, asset, materialize
from dagster_project.cli.recovery import announce_pool_waits, stop_on_interrupt

seconds, guard = float(sys.argv[1]), sys.argv[2] == "guard"

@asset(pool="warehouse_writer")
def pool_writer() -> None:
    print("holding", flush=True)
    time.sleep(seconds)

instance = DagsterInstance.get()
with ExitStack() as guards:
    if guard:
        guards.enter_context(stop_on_interrupt(instance, grace_seconds=2))
        guards.enter_context(announce_pool_waits(instance, every_seconds=1))
    print("materializing", flush=True)
    assert materialize([pool_writer], instance=instance).success
print("done", flush=True)
"""


@pytest.fixture
def dagster_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(settings.INSTANCE_SETTINGS, home / "dagster.yaml")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    return home


def _start(seconds: float, guard: bool = False) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", MATERIALIZE, str(seconds), "guard" if guard else "-"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE", "HF_HUB_OFFLINE": "1"},
    )


def _wait_for_line(process: subprocess.Popen, line: str, timeout: float = 60, whole: bool = True) -> None:
    """Read the process's output until `line` (with whole=False: a line containing it), for at
    most `timeout` quiet-machine seconds (stretched by the load: a fresh process imports Dagster)."""
    deadline = time.monotonic() + stretched(timeout)
    while time.monotonic() < deadline:
        out = process.stdout.readline()
        if out.strip() == line or (not whole and line in out):
            return
        if not out and process.poll() is not None:
            break
    process.kill()
    pytest.fail(f"the process did not print {line!r} (exit {process.poll()})")


def _wait_until_blocked(instance: DagsterInstance, holder_run_id: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + stretched(timeout)
    while time.monotonic() < deadline:
        info = instance.event_log_storage.get_concurrency_info("warehouse_writer")
        if {step.run_id for step in info.pending_steps} - {holder_run_id}:
            return
        time.sleep(0.2)
    pytest.fail("the second run never waited for the pool")


def _only_run(instance: DagsterInstance, status: DagsterRunStatus) -> str:
    records = instance.get_run_records(filters=RunsFilter(statuses=[status]))
    assert len(records) == 1, [(record.dagster_run.run_id, record.dagster_run.status) for record in records]
    return records[0].dagster_run.run_id


def test_killed_holder_is_failed_and_its_slot_freed(dagster_home: Path) -> None:
    holder = _start(600)
    _wait_for_line(holder, "holding")  # the step runs, so it holds the pool's only slot
    with DagsterInstance.get() as instance:
        run_id = _only_run(instance, DagsterRunStatus.STARTED)
        # While it lives it is named as the holder and left alone.
        messages = reclaim_dead_runs(instance)
        assert any(run_id in message and "held by" in message for message in messages), messages
        assert instance.get_run_by_id(run_id).status == DagsterRunStatus.STARTED

        holder.send_signal(signal.SIGKILL)
        holder.wait()
        messages = reclaim_dead_runs(instance)
        assert any(run_id in message and "marked failed" in message for message in messages), messages
        assert any(run_id in message and "freed its slots" in message for message in messages), messages
        assert instance.get_run_by_id(run_id).status == DagsterRunStatus.FAILURE
        assert instance.event_log_storage.get_concurrency_info("warehouse_writer").claimed_slots == []

    # Without the reclaim the next writer waits for the dead run's slot forever.
    writer = _start(0)
    try:
        out, _ = writer.communicate(timeout=stretched(40))
    except subprocess.TimeoutExpired:
        writer.kill()
        writer.communicate()
        pytest.fail("the next pool writer stayed blocked: the killed run's slot was not freed")
    assert writer.returncode == 0 and "done" in out
    with DagsterInstance.get() as instance:
        assert reclaim_dead_runs(instance) == []  # nothing left to reclaim


def test_a_waiting_run_names_the_holder_and_ctrl_c_stops_it(dagster_home: Path) -> None:
    holder = _start(600)
    _wait_for_line(holder, "holding")
    waiter = _start(0, guard=True)
    try:
        with DagsterInstance.get() as instance:
            holder_run = _only_run(instance, DagsterRunStatus.STARTED)
            _wait_for_line(waiter, "materializing")
            _wait_until_blocked(instance, holder_run)
            # The waiting run says which pool it waits for and which run holds it.
            _wait_for_line(waiter, f"waiting for pool warehouse_writer: its slot is held by run {holder_run}", 20)
            waiter.send_signal(signal.SIGINT)
            start = time.monotonic()
            try:
                waiter.wait(timeout=stretched(20))
            except subprocess.TimeoutExpired:
                pytest.fail("Ctrl-C did not stop the run waiting for the pool")
            assert waiter.returncode == 130
            assert time.monotonic() - start < stretched(10)
            waiter_run = _only_run(instance, DagsterRunStatus.CANCELED)
            assert waiter_run != holder_run
            assert instance.get_run_by_id(holder_run).status == DagsterRunStatus.STARTED
            info = instance.event_log_storage.get_concurrency_info("warehouse_writer")
            assert {step.run_id for step in info.pending_steps} <= {holder_run}
    finally:
        for process in (holder, waiter):
            process.kill()
            process.wait()


def _wakeup_fd() -> int:
    """The signal wakeup fd now (setting it is the only way to read it)."""
    fd = signal.set_wakeup_fd(-1)
    signal.set_wakeup_fd(fd)
    return fd


def test_the_guards_end_with_their_block(dagster_home: Path) -> None:
    """`reproduce` runs several runs in one process: each run's guards are gone when it ends (no
    second thread to say a wait twice, the previous wakeup fd back), and the next run's start."""
    guard_threads = {"stop-on-interrupt", "pool-waits"}
    before = _wakeup_fd()
    with DagsterInstance.get() as instance:
        for _ in range(2):
            with stop_on_interrupt(instance), announce_pool_waits(instance, every_seconds=0.05):
                time.sleep(0.2)  # the announcer has looked (and found no run of this process) a few times
                assert guard_threads <= {thread.name for thread in threading.enumerate()}
                assert _wakeup_fd() not in (-1, before)
            assert not guard_threads & {thread.name for thread in threading.enumerate()}
            assert _wakeup_fd() == before
