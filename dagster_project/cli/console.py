"""What `attn-warehouse run` shows while a run executes in its process: one line per asset
(when it started, the rows it wrote, its seconds), a progress bar with rate and ETA while an
asset's pass reports progress, and failed checks. The full Dagster event log goes to a file
(and with `verbose` to stderr as well).

The lines come from the run's event records (DagsterInstance.get_records_for_run), read by a
thread while the run executes; the log file from a logger given to the run's job.
"""

import logging
import re
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from dagster import (
    DagsterEventType,
    DagsterInstance,
    EventLogEntry,
    InitLoggerContext,
    LoggerDefinition,
    logger,
)
from tqdm import tqdm

# The progress lines of defs.assets.writing.progress_logger: "<label>: 120/1800 examples in 30 s (4.0 examples/s)".
PROGRESS_MESSAGE = re.compile(r": (?P<done>\d+)/(?P<total>\d+) examples in (?P<seconds>\d+) s")
POLL_SECONDS = 0.5
_FORMAT = "%(asctime)s %(levelname)-7s %(message)s"


def _run_logger(path: Path) -> logging.Logger:
    return logging.getLogger(f"attn_warehouse.run.{path.stem}")


def _formatted(handler: logging.Handler) -> logging.Handler:
    handler.setFormatter(logging.Formatter(_FORMAT))
    return handler


def _to_file(path: Path) -> logging.Handler:
    return _formatted(logging.FileHandler(path, encoding="utf-8"))


def file_logger(path: Path, verbose: bool) -> LoggerDefinition:
    """A logger definition writing every event of a run to `path` (and to stderr if `verbose`);
    `logs_in_file` closes it when the run ends."""

    @logger(description="Every event of the run to the CLI's log file (and stderr with --verbose).")
    def run_log(_context: InitLoggerContext) -> logging.Logger:
        log = _run_logger(path)
        log.setLevel(logging.DEBUG)
        log.propagate = False
        log.handlers = [_to_file(path), *([_formatted(logging.StreamHandler(sys.stderr))] if verbose else [])]
        return log

    return run_log


@contextmanager
def logs_in_file(path: Path, verbose: bool) -> Iterator[None]:
    """While a run executes, the libraries' own log records go to its log file instead of the
    console (unless `verbose`): transformers' LOAD REPORT tables (a classification head's missing
    or unexpected keys) are for the log, not between the step lines. When it ends, the handlers
    come off and the files close, so a process that runs again (a notebook, the tests) writes to
    no stale file and keeps no file open."""
    library = logging.getLogger("transformers")
    kept = library.handlers
    library_to_file = [] if verbose else [_to_file(path)]
    library.handlers = library_to_file or kept
    try:
        yield
    finally:
        library.handlers = kept
        run_log = _run_logger(path)
        for handler in [*library_to_file, *run_log.handlers]:
            handler.close()
        run_log.handlers = []


def rows_written(metadata: Mapping[str, Any]) -> dict[str, int]:
    """Table -> rows from a materialization's `<table>_rows` metadata (writing.write_partition);
    a chart's `view_rows` are rows read, not written."""
    return {
        name.removesuffix("_rows"): int(getattr(value, "value", value))
        for name, value in metadata.items()
        if name.endswith("_rows") and name != "view_rows" and isinstance(getattr(value, "value", value), int)
    }


def asset_line(step: str, started: float, seconds: float, metadata: Mapping[str, Any]) -> str:
    """One asset's line: start time, name, seconds, and rows written per table (a chart: the
    view rows it drew; a skipped one: why)."""
    clock = datetime.fromtimestamp(started).strftime("%H:%M:%S")
    rows = rows_written(metadata)
    value = {name: getattr(item, "value", item) for name, item in metadata.items()}
    if "skipped" in value:
        what = f"skipped: {value['skipped']}"
    elif rows:
        what = f"{sum(rows.values()):,} rows (" + ", ".join(f"{table} {count:,}" for table, count in rows.items()) + ")"
    elif "view_rows" in value:
        what = f"chart from {value['view_rows']:,} rows of {value.get('view', 'its view')}"
    else:
        what = "done"
    return f"{clock} {step:<40} {seconds:7.1f} s  {what}"


@dataclass
class _Step:
    started: float
    metadata: dict[str, Any] = field(default_factory=dict)  # of its materializations
    bar: tqdm | None = None


class RunConsole:
    """Follows one run's events from another thread while the run executes in this process.

    `start(run_id)` before the run, `stop()` after it. `failures` collects (step, message) of
    failed steps and checks."""

    def __init__(self, instance: DagsterInstance, total_steps: int, write: Callable[[str], None] | None = None):
        self.instance = instance
        self.total_steps = total_steps
        self.write = write or (lambda line: tqdm.write(line, file=sys.stdout))
        self.failures: list[tuple[str, str]] = []
        self.done = 0
        self._steps: dict[str, _Step] = {}
        self._cursor: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, run_id: str) -> None:
        """Follow run `run_id`'s events on a background thread; call it before the run executes."""
        self._thread = threading.Thread(target=self._follow, args=(run_id,), name="run-console", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Show the run's last events, end the following thread and close the progress bars; call it after the run."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        for step in self._steps.values():
            if step.bar is not None:
                step.bar.close()

    def _follow(self, run_id: str) -> None:
        while True:
            stopping = self._stop.is_set()  # read before the last poll, so nothing written before stop() is missed
            connection = self.instance.get_records_for_run(run_id, cursor=self._cursor)
            self._cursor = connection.cursor
            for record in connection.records:
                self.show(record.event_log_entry)
            if stopping:
                return
            self._stop.wait(POLL_SECONDS)

    def show(self, entry: EventLogEntry) -> None:
        """Print what one event says a person needs to see."""
        event, step_key = entry.dagster_event, entry.step_key
        if event is None:
            if step_key and step_key in self._steps and (match := PROGRESS_MESSAGE.search(entry.user_message)):
                self._progress(step_key, int(match["done"]), int(match["total"]), float(match["seconds"]))
            return
        kind = event.event_type
        if kind == DagsterEventType.STEP_START:
            self._steps[step_key] = _Step(started=entry.timestamp)
        elif kind == DagsterEventType.ASSET_MATERIALIZATION and step_key in self._steps:
            self._steps[step_key].metadata.update(event.step_materialization_data.materialization.metadata)
        elif kind == DagsterEventType.ASSET_CHECK_EVALUATION:
            evaluation = event.event_specific_data
            if not evaluation.passed:
                message = f"check {evaluation.check_name} of {evaluation.asset_key.to_user_string()} failed"
                self.failures.append((step_key or "", message))
                self.write(f"         {message}")
        elif kind in (DagsterEventType.STEP_SUCCESS, DagsterEventType.STEP_FAILURE) and step_key in self._steps:
            step = self._steps.pop(step_key)
            if step.bar is not None:
                step.bar.close()
            self.done += 1
            seconds = entry.timestamp - step.started
            if kind == DagsterEventType.STEP_SUCCESS:
                line = asset_line(step_key, step.started, seconds, step.metadata)
                self.write(f"[{self.done:>2}/{self.total_steps}] {line}")
            else:
                error = event.step_failure_data.error
                cause = error.cause or error
                message = " ".join(cause.message.split()) if cause else "failed"
                self.failures.append((step_key, message))
                clock = datetime.fromtimestamp(step.started).strftime("%H:%M:%S")
                self.write(f"[{self.done:>2}/{self.total_steps}] {clock} {step_key:<40} {seconds:7.1f} s  FAILED")

    def _progress(self, step_key: str, done: int, total: int, seconds: float) -> None:
        step = self._steps[step_key]
        if step.bar is None:
            step.bar = tqdm(
                total=total,
                desc=step_key,
                unit="ex",
                leave=False,
                file=sys.stderr,
                disable=None,  # no bar where stderr is not a terminal (the log file has the lines)
                bar_format="{desc}: {percentage:3.0f}%|{bar:30}| {n_fmt}/{total_fmt} {postfix}",
            )
        rate = done / seconds if seconds else 0.0
        remaining = (total - done) / rate if rate else 0.0
        step.bar.n = done
        step.bar.set_postfix_str(f"{rate:.1f} examples/s, ETA {int(remaining // 60)}:{int(remaining % 60):02d}")
