"""A corpus asset's run config (defs/assets/corpora.py): size and max_len under 1 are errors, not
"unset" (size=-5 used to slice off 5 of demo's 24 examples; 0 meant the corpus's default); max_len
is at most the model's positions (a longer one failed the forward pass after the examples were
written) and what the examples' SMALLINT columns hold (100000 failed the write's cast)."""

import pytest
from transformers import BertConfig, DebertaV2Config, PretrainedConfig, RobertaConfig

from dagster_project.corpora import CORPORA
from dagster_project.defs.assets.corpora import CorpusConfig, _run_sampling, model_positions, run_max_len


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


BERT = BertConfig(max_position_embeddings=160)


@pytest.mark.parametrize(
    ("config", "positions"),
    [
        (BERT, 160),
        (RobertaConfig(max_position_embeddings=514, pad_token_id=1), 512),  # ids start after the padding id
        (DebertaV2Config(position_biased_input=False), None),  # relative positions only
    ],
)
def test_the_positions_of_a_model(config: PretrainedConfig, positions: int | None) -> None:
    assert model_positions(config) == positions


def test_max_len_is_bounded_by_the_models_positions_and_the_columns() -> None:
    spec = CORPORA["demo"]
    assert run_max_len("demo_examples", spec, CorpusConfig(max_len=160), BERT) == 160
    with pytest.raises(ValueError) as error:
        run_max_len("demo_examples", spec, CorpusConfig(max_len=200), BERT)
    assert str(error.value) == (
        "demo_examples: run config max_len 200 is more than the 160 positions of the model (bert), which takes no "
        "longer input: set max_len to at most 160 (or leave it out for the corpus's default)"
    )
    relative = DebertaV2Config(position_biased_input=False)
    assert run_max_len("demo_examples", spec, CorpusConfig(max_len=32767), relative) == 32767
    with pytest.raises(ValueError) as error:
        run_max_len("demo_examples", spec, CorpusConfig(max_len=100000), relative)
    assert str(error.value) == (
        "demo_examples: run config max_len 100000 is more than 32767, the most the examples' max_len and n_tokens "
        "columns (SMALLINT) hold: set max_len to at most 32767"
    )


def test_a_default_max_len_is_at_most_the_models_positions() -> None:
    assert run_max_len("demo_examples", CORPORA["demo"], CorpusConfig(), BERT) == 128
    assert CORPORA["gap_development"].max_len == 512
    assert run_max_len("gap_development_examples", CORPORA["gap_development"], CorpusConfig(), BERT) == 160
