"""Where a pass spends its time on its device: forward, statistics on the device, copy to the host,
frame building (the batches' host tensors and the result frames). Timing is opt-in (the device bench
asks for it): a timed pass waits for the device at every phase boundary, so it runs a little slower
than an untimed one and its phases add up to its wall time."""

import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TypeVar

import torch

from dagster_project.compute.devices import synchronize

PHASES = ("forward", "statistics", "copy", "frames")
T = TypeVar("T")
_END = object()


@dataclass
class PassTimings:
    """Seconds per phase of one pass, each exclusive of the phases nested in it."""

    device: torch.device
    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PHASES, 0.0))
    _open: list[str] = field(default_factory=list)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Add the time the block takes on the device to phase `name`, and take it from the phase it is
        nested in; waits for the device at both ends."""
        synchronize(self.device)
        started = time.perf_counter()
        self._open.append(name)
        try:
            yield
        finally:
            synchronize(self.device)
            self._open.pop()
            elapsed = time.perf_counter() - started
            self.seconds[name] += elapsed
            if self._open:
                self.seconds[self._open[-1]] -= elapsed

    def shares(self) -> dict[str, float]:
        """Each phase's fraction of the pass's timed seconds (all 0 when nothing was timed)."""
        total = sum(self.seconds.values()) or 1.0
        return {name: seconds / total for name, seconds in self.seconds.items()}


_TIMED: ContextVar[PassTimings | None] = ContextVar("timed_pass", default=None)


@contextmanager
def timing(timings: PassTimings | None) -> Iterator[None]:
    """Make `timings` the pass being timed in this context (None: time nothing)."""
    token = _TIMED.set(timings)
    try:
        yield
    finally:
        _TIMED.reset(token)


def timed() -> bool:
    """Whether a pass is being timed in this context."""
    return _TIMED.get() is not None


@contextmanager
def phase(name: str) -> Iterator[None]:
    """A phase of the pass being timed, if one is; otherwise nothing."""
    timings = _TIMED.get()
    if timings is None:
        yield
        return
    with timings.phase(name):
        yield


def phase_of_each(items: Iterable[T], name: str) -> Iterator[T]:
    """`items`, the making of each one (a generator's work up to its next item) timed as phase `name`."""
    iterator = iter(items)
    while True:
        with phase(name):
            item = next(iterator, _END)
        if item is _END:
            return
        yield item
