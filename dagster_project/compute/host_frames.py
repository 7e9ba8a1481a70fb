"""Frames built on the host beside the device's work. A pass hands the flat columns of each layer's rows
to one worker thread that turns them into polars frames while the next layers and batches compute (polars
and numpy leave the interpreter in their loops, torch on its device). A timed pass (compute.pass_timings)
builds them in place, so its phases stay exclusive and add up to its time."""

import os
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

from dagster_project.compute.pass_timings import timed

Built = TypeVar("Built")
# one worker per process, frames built in the order they were handed over; a process forked from one
# that had started it inherits no thread, so it starts its own
_WORKERS: dict[int, ThreadPoolExecutor] = {}


def built_beside(build: Callable[..., Built], *args: object) -> Future[Built]:
    """`build(*args)` on the frame worker (in place in a timed pass); its result, or its error, comes from
    the future's result()."""
    if not timed():
        worker = _WORKERS.get(os.getpid())
        if worker is None:
            worker = _WORKERS[os.getpid()] = ThreadPoolExecutor(max_workers=1, thread_name_prefix="host-frames")
        return worker.submit(build, *args)
    future: Future[Built] = Future()
    future.set_result(build(*args))
    return future
