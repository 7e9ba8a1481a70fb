"""A fake device memory limit for the back-off tests: a module's forward raises
torch.OutOfMemoryError when its input is larger than a limit."""

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch


def padded_positions(_args: tuple, kwargs: dict) -> int:
    """The size of a transformers forward: its padded positions (batch x width)."""
    return kwargs["input_ids"].numel()


def batch_rows(args: tuple, kwargs: dict) -> int:
    """The size of a forward: the rows of its first input (examples, sentences)."""
    first = args[0] if args else next(iter(kwargs.values()))
    return len(first.gold) if hasattr(first, "gold") else len(first)


@contextmanager
def out_of_memory_above(
    module: torch.nn.Module, limit: int | None, size: Callable[[tuple, dict], int] = padded_positions
) -> Iterator[list[int]]:
    """Within the block, `module`'s forward raises torch.OutOfMemoryError when size(args, kwargs) is
    over `limit` (None: on every call); yields the size of every call tried."""
    tried: list[int] = []

    def limited(_module: torch.nn.Module, args: tuple, kwargs: dict) -> None:
        tried.append(size(args, kwargs))
        if limit is None or tried[-1] > limit:
            raise torch.OutOfMemoryError(f"simulated: {tried[-1]} over {limit}")

    handle = module.register_forward_pre_hook(limited, with_kwargs=True)
    try:
        yield tried
    finally:
        handle.remove()
