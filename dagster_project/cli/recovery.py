"""Runs whose process is gone, and the pool slots they hold.

Dagster frees a step's pool slot when the step ends in its own process. A run killed with
SIGKILL never gets there, so its `warehouse_writer` slot stays claimed and every later writer
waits for it. For runs the daemon launches, `run_monitoring.free_slots_after_run_end_seconds`
in .dagster/dagster.yaml frees the slots once the run has ended (the code server marks a run
whose worker died as failed). The CLI runs in-process, with no daemon, so before it
materializes, `reclaim_dead_runs` does the same for this instance: a run in progress whose
recorded processes are all gone is marked failed (or canceled, if it was canceling) and its
slots are freed, as are slots still held by runs that have ended.

Also `stop_on_interrupt`: while a step waits for a pool slot, Dagster only acts on Ctrl-C at
the next step boundary, so a blocked CLI ignores it; this makes Ctrl-C (or SIGTERM) stop it.
And `announce_pool_waits`: a run that waits for a slot says so, and which run holds it.

Processes are looked up on this host: the runs are assumed to run here (the project's
instance is a local SQLite one).
"""

import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from dagster import DagsterEventType, DagsterInstance, DagsterRunStatus, RunRecord, RunsFilter

_IN_PROGRESS = [DagsterRunStatus.STARTING, DagsterRunStatus.STARTED, DagsterRunStatus.CANCELING]
_ENDED = {DagsterRunStatus.SUCCESS, DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED}
# A process created this long after the event that recorded its pid is a later process reusing it.
_PID_REUSE_SLACK_SECONDS = 2.0


def _process_start_time(pid: int) -> float | None:
    """When process `pid` started (seconds since the epoch) if it exists and is not a zombie,
    else None. Without /proc (not Linux) a live pid gets the start time 0 (no reuse check)."""
    stat_path = f"/proc/{pid}/stat"
    if not os.path.exists("/proc/self/stat"):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass  # another user's process: it exists
        return 0.0
    try:
        with open(stat_path) as stat:
            fields = stat.read().rsplit(")", 1)[1].split()  # after "pid (comm)"
        with open("/proc/stat") as system:
            boot = next(float(line.split()[1]) for line in system if line.startswith("btime "))
    except (FileNotFoundError, ProcessLookupError, StopIteration):
        return None
    if fields[0] in ("Z", "X"):  # exited, not yet reaped by its parent
        return None
    return boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")


def _recorded_pids(instance: DagsterInstance, run_id: str) -> list[tuple[int, float]]:
    """(pid, time recorded) of each process the run's engine events name: the process that
    executes its steps in-process, or the run worker and step subprocesses of a launched run."""
    found = []
    for entry in instance.all_logs(run_id, of_type=DagsterEventType.ENGINE_EVENT):
        data = entry.dagster_event.event_specific_data if entry.dagster_event else None
        value = (getattr(data, "metadata", None) or {}).get("pid")
        text = getattr(value, "value", value)
        if isinstance(text, str | int) and str(text).isdigit():
            found.append((int(text), entry.timestamp))
    return found


def _live_pids(recorded: Iterable[tuple[int, float]]) -> list[int]:
    live = []
    for pid, recorded_at in recorded:
        started = _process_start_time(pid)
        if started is not None and started <= recorded_at + _PID_REUSE_SLACK_SECONDS:
            live.append(pid)
    return sorted(set(live))


def _free_slots(instance: DagsterInstance, run_id: str) -> None:
    # The call the monitoring daemon makes for `free_slots_after_run_end_seconds`; it also drops
    # the run's pending (blocked) steps and hands the freed slots to steps waiting for them.
    instance.event_log_storage.free_concurrency_slots_for_run(run_id)


def _slot_holders(instance: DagsterInstance) -> dict[str, set[str]]:
    """Run id -> the pools in which it holds a slot or has a step waiting for one."""
    storage = instance.event_log_storage
    holders: dict[str, set[str]] = {}
    for pool in sorted(storage.get_concurrency_keys()):
        info = storage.get_concurrency_info(pool)
        for run_id in {slot.run_id for slot in info.claimed_slots} | {step.run_id for step in info.pending_steps}:
            holders.setdefault(run_id, set()).add(pool)
    return holders


def _mark_ended(instance: DagsterInstance, record: RunRecord, reason: str) -> str:
    run = record.dagster_run
    if run.status == DagsterRunStatus.CANCELING:
        instance.report_run_canceled(run, message=reason)
        return "canceled"
    instance.report_run_failed(run, message=reason)
    return "failed"


def reclaim_dead_runs(instance: DagsterInstance) -> list[str]:
    """End the in-progress runs of `instance` whose processes are gone and free the pool slots
    of runs that have ended; return one line per run ended or freed and per live run that holds
    a pool slot (which a new run will wait for)."""
    concurrency = instance.event_log_storage.supports_global_concurrency_limits
    holders = _slot_holders(instance) if concurrency else {}
    messages = []
    live_holders = []
    for record in instance.get_run_records(filters=RunsFilter(statuses=_IN_PROGRESS)):
        run = record.dagster_run
        recorded = _recorded_pids(instance, run.run_id)
        if not recorded:
            continue  # no process recorded yet: it has claimed no slot, leave it to start
        live = _live_pids(recorded)
        pools = ", ".join(sorted(holders.get(run.run_id, ())))
        if live:
            if pools:
                live_holders.append(
                    f"pool {pools}: held by run {run.run_id} ({run.job_name}, {run.status.value}, "
                    f"pid {', '.join(map(str, live))}); steps in that pool wait until it finishes"
                )
            continue
        pids = ", ".join(str(pid) for pid in sorted({pid for pid, _ in recorded}))
        ended = _mark_ended(
            instance, record, f"Marked {run.status.value.lower()} run as ended: its process (pid {pids}) is gone."
        )
        messages.append(f"run {run.run_id} ({run.job_name}): process {pids} is gone; marked {ended}")
        if run.run_id in holders:
            _free_slots(instance, run.run_id)
            messages.append(f"run {run.run_id}: freed its slots in pool {pools}")
            del holders[run.run_id]
    # Runs that ended (or were deleted) but still hold slots: what free_slots_after_run_end_seconds
    # frees in the daemon, freed here at once since no daemon may be running.
    for run_id, pools in sorted(holders.items()):
        record = instance.get_run_record_by_id(run_id)
        if record is None or record.dagster_run.status in _ENDED:
            _free_slots(instance, run_id)
            status = "deleted" if record is None else record.dagster_run.status.value
            messages.append(f"run {run_id} ({status}): freed its slots in pool {', '.join(sorted(pools))}")
    return messages + live_holders


def _runs_of_this_process(instance: DagsterInstance) -> list[RunRecord]:
    pid = os.getpid()
    return [
        record
        for record in instance.get_run_records(filters=RunsFilter(statuses=_IN_PROGRESS))
        if pid in {recorded for recorded, _ in _recorded_pids(instance, record.dagster_run.run_id)}
    ]


@contextmanager
def announce_pool_waits(instance: DagsterInstance, every_seconds: float = 30.0) -> Iterator[None]:
    """While the block runs, print every `every_seconds` which pool this process's runs' steps
    wait for and which run holds it (Dagster itself says so only at DEBUG, every 5 minutes). A
    thread that ends with the block, so a process running several runs (`reproduce`) says each
    wait once."""
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(every_seconds):
            ours = {record.dagster_run.run_id for record in _runs_of_this_process(instance)}
            storage = instance.event_log_storage
            for pool in sorted(storage.get_concurrency_keys()) if ours else ():
                info = storage.get_concurrency_info(pool)
                if not {step.run_id for step in info.pending_steps} & ours:
                    continue
                holders = sorted({slot.run_id for slot in info.claimed_slots} - ours)
                if holders:  # else the slot is this run's own, between two of its steps
                    print(f"waiting for pool {pool}: its slot is held by run {', '.join(holders)}", flush=True)

    thread = threading.Thread(target=watch, name="pool-waits", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


@contextmanager
def stop_on_interrupt(instance: DagsterInstance, grace_seconds: float = 5.0) -> Iterator[None]:
    """While the block runs, make SIGINT/SIGTERM stop this process within `grace_seconds` even
    while a step waits for a pool slot. Dagster defers interrupts to step boundaries (a running
    step is interrupted at once and its run fails as usual); a run whose steps are all blocked
    never reaches one. After the grace period, or at a second interrupt, the in-progress runs of
    this process are marked canceled, their slots freed, and the process exits with status 130.

    Enter it in the main thread. It reads a signal wakeup fd in a thread, so it sees signals
    whatever handler Dagster has installed; on leaving, the previous wakeup fd is back and the
    thread has ended."""
    reader, writer = socket.socketpair()
    writer.setblocking(False)
    previous_fd = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
    watched = {signal.SIGINT, signal.SIGTERM}

    def received() -> int:
        data = reader.recv(1)
        return data[0] if data else -1  # -1: the block has ended and closed the writer

    def watch() -> None:
        while (signum := received()) not in watched:
            if signum < 0:
                return
        print(f"interrupted: stopping (forced in {grace_seconds:g} s, or at a second Ctrl-C)", file=sys.stderr)
        reader.settimeout(grace_seconds)
        deadline = time.monotonic() + grace_seconds
        try:  # Dagster's own handling first: at a step boundary the run ends and so does the block
            while time.monotonic() < deadline and (signum := received()) not in watched:
                if signum < 0:
                    return
        except TimeoutError:
            pass
        try:
            for run_id in cancel_runs_of_this_process(instance):
                print(f"run {run_id}: canceled, slots freed", file=sys.stderr)
        finally:
            sys.stderr.flush()
            sys.stdout.flush()
            os._exit(130)

    thread = threading.Thread(target=watch, name="stop-on-interrupt", daemon=True)
    thread.start()
    # SIGTERM as Ctrl-C (Dagster maps it so inside a step only): a KeyboardInterrupt between
    # steps too, where its default would end the process without a word.
    previous_term = signal.getsignal(signal.SIGTERM)
    if previous_term == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        yield
    finally:
        if previous_term == signal.SIG_DFL:
            signal.signal(signal.SIGTERM, previous_term)
        signal.set_wakeup_fd(previous_fd)
        writer.close()
        thread.join()
        reader.close()


def cancel_run(instance: DagsterInstance, run_id: str) -> DagsterRunStatus | None:
    """Mark run `run_id` canceled (interrupted) and free its pool slots where it is in progress; its
    status then, None where the instance has no such run (interrupted before it was created)."""
    run = instance.get_run_by_id(run_id)
    if run is None:
        return None
    if run.status in _IN_PROGRESS:
        instance.report_run_canceled(run, message="Interrupted (Ctrl-C or SIGTERM).")
        _free_slots(instance, run_id)
        return DagsterRunStatus.CANCELED
    return run.status


def cancel_runs_of_this_process(instance: DagsterInstance) -> list[str]:
    """Mark the in-progress runs of this process canceled (interrupted) and free their pool slots;
    their run ids."""
    run_ids = [record.dagster_run.run_id for record in _runs_of_this_process(instance)]
    return [run_id for run_id in run_ids if cancel_run(instance, run_id)]
