"""A corpus asset's run config (defs/assets/corpora.py): size and max_len under 1 are errors, not
"unset" (size=-5 used to slice off 5 of demo's 24 examples; 0 meant the corpus's default)."""

import pytest

from dagster_project.corpora import CORPORA
from dagster_project.defs.assets.corpora import CorpusConfig, _run_sampling


@pytest.mark.parametrize("setting", ["size", "max_len"])
@pytest.mark.parametrize("value", [-5, 0])
def test_a_size_or_max_len_under_one_is_refused(setting: str, value: int) -> None:
    with pytest.raises(ValueError) as error:
        _run_sampling("demo_examples", CORPORA["demo"], CorpusConfig(**{setting: value}))
    assert str(error.value) == (
        f"demo_examples: run config {setting} must be at least 1, got {value} (leave it out for the corpus's default)"
    )


def test_set_values_and_defaults() -> None:
    spec = CORPORA["demo"]
    assert _run_sampling("demo_examples", spec, CorpusConfig(size=3, seed=7))[:2] == (3, 7)
    assert _run_sampling("demo_examples", spec, CorpusConfig()) == (spec.size, spec.seed, spec.overlong)
