"""Controls: models that a reading of a trained model is set beside, each named by the source
`<kind>:<model>`. The one kind, `random-init`, is the model's architecture and tokenizer with seeded
random weights (compute/random_init.py builds it): Clark (Table 3) and Kovaleva (Table 1) set randomly
initialised models beside trained ones, since what a reading finds in random weights says nothing about
what training taught. `random-init:<model>` has seed 0, `random-init:<model>@seed=<n>` seed n.

Only names and parsing here, no torch: the scorecard and the charts read control sources too.
"""

import re
from dataclasses import dataclass

RANDOM_INIT = "random-init"
PREFIX = f"{RANDOM_INIT}:"
# The controls a model can be given (`attn-warehouse reproduce --control KIND`), each the source `<kind>:<model>`.
CONTROL_KINDS = (RANDOM_INIT,)
DEFAULT_SEED = 0
SEED_SUFFIX = r"@seed=(\d+)$"  # after the base model's source, for a seed other than DEFAULT_SEED
_SEED_SYNTAX = f"'{PREFIX}<hub id or path>' (seed {DEFAULT_SEED}) or '{PREFIX}<hub id or path>@seed=<n>'"


@dataclass(frozen=True)
class RandomInit:
    """A random-init source read: the base model's source as the user gave it, and the seed."""

    base: str
    seed: int = DEFAULT_SEED

    @property
    def source(self) -> str:
        """The source written the one way the `models` table keeps it: the seed only when not the default,
        so `random-init:<base>` pairs with the model whose source is `<base>`."""
        return f"{PREFIX}{self.base}" + (f"@seed={self.seed}" if self.seed != DEFAULT_SEED else "")

    def key(self, base_key: str) -> str:
        """The partition key, from the base model's key (`<base key>--random-init[-seed-<n>]`)."""
        return f"{base_key}--{RANDOM_INIT}" + (f"-seed-{self.seed}" if self.seed != DEFAULT_SEED else "")


def parse_random_init(source: str) -> RandomInit | None:
    """The random-init control `source` names, or None for a source without the prefix. Raises
    ValueError (one line: what is wrong, how to write it) for a prefix with no usable base after it."""
    if not source.startswith(PREFIX):
        return None
    rest = source.removeprefix(PREFIX).strip()
    seed = re.search(SEED_SUFFIX, rest)
    base = rest[: seed.start()].strip() if seed else rest
    if "@seed" in base:
        raise ValueError(f"'{source}': the seed must be a whole number >= 0 at the end, as in {_SEED_SYNTAX}")
    if not base:
        raise ValueError(f"'{source}' names no model after '{PREFIX}': write {_SEED_SYNTAX}")
    if base.startswith(PREFIX):
        raise ValueError(f"'{source}' is a control of a control: write {_SEED_SYNTAX} with a trained model")
    return RandomInit(base, int(seed[1]) if seed else DEFAULT_SEED)
