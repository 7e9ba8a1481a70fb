"""The random-weights control: its source and partition key, its checkpoint (transformers' default
initialisation under the seed, saved once, atomically), its tokenizer, its registration, and its errors."""

from pathlib import Path

import duckdb
import pytest
import torch
from dagster import DagsterInstance
from dagster_duckdb import DuckDBResource
from safetensors.torch import load_file
from transformers import AutoConfig, AutoTokenizer

from dagster_project.compute import random_init
from dagster_project.compute.controls import RandomInit, parse_random_init
from dagster_project.compute.models import ModelLoadError, canonical_source, inspect_model, load_encoder, model_key
from dagster_project.defs.partitions import model_partitions
from dagster_project.defs.registration import register_model

QUERY = "encoder.layer.0.attention.self.query.weight"


@pytest.fixture
def models_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "models_cache"
    monkeypatch.setenv("ATTN_MODELS_CACHE", str(cache))
    return cache


def _weights(folder: str | Path) -> dict[str, torch.Tensor]:
    return load_file(Path(folder) / "model.safetensors")


def test_the_source_names_a_base_model_and_a_seed() -> None:
    assert parse_random_init("org/name") is None
    assert parse_random_init("random-init:org/name") == RandomInit("org/name", 0)
    assert parse_random_init("random-init: /a/b@seed=7") == RandomInit("/a/b", 7)
    assert RandomInit("org/name", 7).source == "random-init:org/name@seed=7"
    # seed 0 is written without its suffix: one source, one partition, paired with the model `org/name`
    assert canonical_source("random-init:org/name@seed=0") == "random-init:org/name"
    minilm = "sentence-transformers/all-MiniLM-L6-v2"
    assert model_key(f"random-init:{minilm}") == "sentence-transformers--all-MiniLM-L6-v2--random-init"
    assert model_key(f"random-init:{minilm}@seed=0") == "sentence-transformers--all-MiniLM-L6-v2--random-init"
    assert model_key("random-init:bert-base-uncased@seed=3") == "bert-base-uncased--random-init-seed-3"


def test_the_control_is_the_default_initialisation_under_its_seed(tiny_model_dir: Path, models_cache: Path) -> None:
    """tiny_model_dir is BertModel(config) drawn under seed 1: the control of seed 1 is those very weights,
    the control of seed 0 others, both of transformers' default initialisation (normal, std 0.02; zero
    biases; LayerNorm at 1 and 0)."""
    base = _weights(tiny_model_dir)
    seed_0 = _weights(inspect_model(f"random-init:{tiny_model_dir}").resolved_path)
    seed_1 = _weights(inspect_model(f"random-init:{tiny_model_dir}@seed=1").resolved_path)
    assert set(seed_0) == set(seed_1) == set(base)
    assert all(torch.equal(seed_1[name], base[name]) for name in base)
    differing = {name for name in base if not torch.equal(seed_0[name], base[name])}
    assert differing == {name for name in base if name.endswith("weight") and "LayerNorm" not in name}
    assert abs(seed_0[QUERY].std().item() - 0.02) < 0.002  # 32 x 32 draws: the std within 10%
    assert torch.equal(seed_0["encoder.layer.0.attention.self.query.bias"], torch.zeros(32))
    assert torch.equal(seed_0["embeddings.LayerNorm.weight"], torch.ones(32))


def test_the_same_source_and_seed_give_the_same_weights_and_folder(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = f"random-init:{tiny_model_dir}"
    monkeypatch.setenv("ATTN_MODELS_CACHE", str(tmp_path / "first"))
    first = inspect_model(source)
    saved = (Path(first.resolved_path) / "model.safetensors").stat().st_mtime_ns
    again = inspect_model(source)
    assert again == first  # the folder re-used, not written again
    assert (Path(again.resolved_path) / "model.safetensors").stat().st_mtime_ns == saved
    assert Path(first.resolved_path).parent == tmp_path / "first" / "random-init"
    assert Path(first.resolved_path).name.startswith(f"{model_key(str(tiny_model_dir))}-seed-0-")

    monkeypatch.setenv("ATTN_MODELS_CACHE", str(tmp_path / "second"))  # drawn anew in another cache
    second = inspect_model(source)
    assert second.resolved_path != first.resolved_path and second.revision == first.revision
    drawn, redrawn = _weights(first.resolved_path), _weights(second.resolved_path)
    assert all(torch.equal(drawn[name], redrawn[name]) for name in drawn)

    other_seed = inspect_model(f"{source}@seed=2")
    assert not torch.equal(_weights(other_seed.resolved_path)[QUERY], drawn[QUERY])
    assert other_seed.model_id == f"{first.model_id}-seed-2"
    base = inspect_model(str(tiny_model_dir))
    assert len({base.revision, first.revision, other_seed.revision}) == 3
    assert first.revision.startswith("random-init:seed=0:") and base.revision.startswith("local:")


def test_the_control_loads_with_its_own_weights(tiny_model_dir: Path, models_cache: Path) -> None:
    spec = inspect_model(f"random-init:{tiny_model_dir}@seed=4")
    loaded = load_encoder(spec.source).model.state_dict()
    assert torch.equal(loaded[QUERY], _weights(spec.resolved_path)[QUERY])
    assert (spec.n_layers, spec.n_heads, spec.model_type) == (2, 4, "bert")


def test_the_tokenizer_is_the_base_models(tiny_model_dir: Path, models_cache: Path) -> None:
    base = AutoTokenizer.from_pretrained(tiny_model_dir)
    control = AutoTokenizer.from_pretrained(inspect_model(f"random-init:{tiny_model_dir}").resolved_path)
    assert control.get_vocab() == base.get_vocab()
    assert control.all_special_ids == base.all_special_ids
    pairs = (["The cat sat on the mat.", "Unbelievably, it slept!"], ["a dog", "[SEP] naïve café"])
    assert control(*pairs).data == base(*pairs).data


def test_a_masked_lm_keeps_its_head(tiny_mlm_dir: Path, models_cache: Path) -> None:
    folder = inspect_model(f"random-init:{tiny_mlm_dir}").resolved_path
    assert AutoConfig.from_pretrained(folder).architectures == ["BertForMaskedLM"]
    assert set(_weights(folder)) == set(_weights(tiny_mlm_dir))


def test_a_killed_save_leaves_no_checkpoint_and_the_next_one_replaces_it(
    tiny_model_dir: Path, models_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def killed(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    source = f"random-init:{tiny_model_dir}"
    with monkeypatch.context() as patched:
        patched.setattr(random_init, "_file_digest", killed)  # after the weights and the tokenizer are written
        with pytest.raises(KeyboardInterrupt):
            inspect_model(source)
    (partial,) = (models_cache / "random-init").glob("*.partial")
    assert (partial / "model.safetensors").is_file()
    assert [path.name for path in (models_cache / "random-init").iterdir() if not path.name.startswith(".")] == [
        partial.name
    ]
    spec = inspect_model(source)
    assert not partial.exists() and Path(spec.resolved_path).name == partial.name.removesuffix(".partial")
    assert (Path(spec.resolved_path) / random_init.RECORD).is_file()


def test_the_control_registers_under_the_base_models_source(
    tiny_model_dir: Path, models_cache: Path, tmp_path: Path
) -> None:
    database = tmp_path / "warehouse.duckdb"
    instance = DagsterInstance.ephemeral()
    warehouse = DuckDBResource(database=str(database))
    base = register_model(str(tiny_model_dir), instance, warehouse)
    control = register_model(f"random-init:{tiny_model_dir}@seed=0", instance, warehouse)
    assert (control.model_id, control.source) == (f"{base.model_id}--random-init", f"random-init:{tiny_model_dir}")
    assert set(instance.get_dynamic_partitions(model_partitions.name)) == {base.model_id, control.model_id}
    with duckdb.connect(str(database)) as connection:
        pairs = connection.execute(
            "SELECT c.model_id, b.model_id FROM models c JOIN models b "
            "ON starts_with(c.source, 'random-init:') AND substr(c.source, length('random-init:') + 1) = b.source"
        ).fetchall()
    assert pairs == [(control.model_id, base.model_id)]


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("random-init:", "'random-init:' names no model after 'random-init:': write 'random-init:<hub id or path>'"),
        ("random-init:org/name@seed=x", "'random-init:org/name@seed=x': the seed must be a whole number >= 0"),
        ("random-init:org/name@seed=-1", "'random-init:org/name@seed=-1': the seed must be a whole number >= 0"),
        ("random-init:random-init:org/name", "'random-init:random-init:org/name' is a control of a control"),
        ("random-init:./no-such-checkpoint", "no model folder at "),
    ],
)
def test_a_bad_source_after_the_prefix_is_one_clear_line(source: str, message: str, models_cache: Path) -> None:
    with pytest.raises(ModelLoadError) as error:
        inspect_model(source)
    assert str(error.value).startswith(message) and "\n" not in str(error.value)
    assert not models_cache.exists()
