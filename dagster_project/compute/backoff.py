"""Backing off when a pass runs out of device memory: the size it works in (padded positions per
batch, examples per micro-batch, tangents per call) is halved, logged, and the work tried again,
down to the smallest size that can run; a pass that does not fit there raises PassOutOfMemory,
which names what to lower."""

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import torch

LOG = logging.getLogger(__name__)
Result = TypeVar("Result")


class PassOutOfMemory(RuntimeError):
    """A pass that does not fit the device's memory even at its smallest batch."""


@dataclass(frozen=True)
class BackOff:
    """How one pass backs off: `what` names it in messages, `unit` says what its size counts,
    `remedy` what the user can change when even `smallest` does not fit."""

    what: str
    unit: str
    remedy: str
    device: torch.device
    smallest: int = 1  # e.g. the longest example's pieces, for a padded-positions budget

    def halved(self, size: int, reason: str, detail: str = "") -> int:
        """The size to retry with after a try at `size` ran out of memory (`reason`): half of it, but
        not under `smallest` (logged, the device's cached blocks freed); PassOutOfMemory at `smallest`.
        `detail` is added to the error (e.g. the example's length)."""
        if self.device.type == "cuda":
            torch.cuda.empty_cache()
        if size <= self.smallest:
            raise PassOutOfMemory(
                f"{self.what}: out of memory on {self.device}{detail} even at its smallest size "
                f"({self.unit}: {size}): {reason}. {self.remedy}"
            )
        smaller = max(size // 2, self.smallest)
        LOG.warning(f"{self.what}: out of memory on {self.device} at {size} {self.unit}, retrying at {smaller}")
        return smaller

    def retrying(self, attempt: Callable[[int], Result], size: int) -> Result:
        """attempt(size), tried again from the start at a halved size each time it runs out of memory;
        for work that keeps nothing from a failed try, so a retried result is a run at the smaller size."""
        while True:
            try:
                return attempt(size)
            except torch.OutOfMemoryError as error:
                # only the message leaves the except clause: its traceback holds the failed try's tensors
                reason = str(error)
            size = self.halved(size, reason)
