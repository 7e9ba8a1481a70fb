"""Pure tensor functions compiled by torch.compile (Inductor) on first use, with the plain function as
the fallback where compiling fails (no C++ compiler, an unsupported platform): said once in the log.

Inductor keeps what it compiled on disk (TORCHINDUCTOR_CACHE_DIR, default /tmp/torchinductor_$USER),
so a machine pays the compile once (~40 s on 2 cores) and each later process a cache load (~5-10 s).
"""

import logging
from collections.abc import Callable

import torch

LOG = logging.getLogger(__name__)


class CompiledFunction:
    """`function` compiled with dynamic shapes when first called; `function` itself, from then on, if
    that compile or a call of the compiled code raises."""

    def __init__(self, function: Callable[..., torch.Tensor]) -> None:
        self.function = function
        self._compiled: Callable[..., torch.Tensor] | None = None
        self.failed = False

    def __call__(self, *args: torch.Tensor) -> torch.Tensor:
        if self.failed:
            return self.function(*args)
        if self._compiled is None:
            self._compiled = torch.compile(self.function, dynamic=True)
        try:
            return self._compiled(*args)
        except Exception as error:  # torch reports a missing or failing compiler under many exception types
            self.failed = True
            LOG.warning(
                "torch.compile of %s failed, so it runs uncompiled (slower, same values): %s",
                self.function.__qualname__,
                str(error).splitlines()[0] if str(error) else type(error).__name__,
            )
            return self.function(*args)
