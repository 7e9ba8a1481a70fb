"""Frames built on the host beside the device's work. A pass hands the flat columns of each layer's rows
to one worker thread that turns them into polars frames while the next layers and batches compute (polars
and numpy leave the interpreter in their loops, torch on its device). A timed pass (compute.pass_timings)
builds them in place, so its phases stay exclusive and add up to its time."""

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

from dagster_project.compute.pass_timings import timed

Built = TypeVar("Built")
# one worker for the process: frames are built in the order they were handed over
_WORKER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="host-frames")


def built_beside(build: Callable[..., Built], *args: object) -> Future[Built]:
    """`build(*args)` on the frame worker (in place in a timed pass); its result, or its error, comes from
    the future's result()."""
    if not timed():
        return _WORKER.submit(build, *args)
    future: Future[Built] = Future()
    future.set_result(build(*args))
    return future
