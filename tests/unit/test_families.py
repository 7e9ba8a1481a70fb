"""The eight encoder families on tiny random models (tests/tiny_models.FAMILIES): special tokens from
the tokenizer's own ids, token types only where the model has them, the `</s></s>` separator run,
attention facts against the model's own maps, head ablation, fine-tuning's recipe, registration."""

from pathlib import Path

import numpy as np
import polars as pl
import pytest
import torch
from transformers import FunnelConfig, FunnelModel, LongformerConfig, LongformerModel, PreTrainedTokenizerBase

from dagster_project.compute.attention_pass import extract_attention_facts
from dagster_project.compute.batching import length_batches
from dagster_project.compute.clark.probe_inputs import attention_features
from dagster_project.compute.kovaleva.ablation import ablated_logits, disabling_heads, use_ablation_attention
from dagster_project.compute.kovaleva.finetuning import build_classifier, no_decay_parameters
from dagster_project.compute.kovaleva.task_data import encode_task
from dagster_project.compute.metrics import head_summaries
from dagster_project.compute.models import LoadedEncoder, ModelLoadError, inspect_model, load_encoder
from dagster_project.corpora import CorpusData, encode_corpus
from tests.tiny_models import FAMILIES, TINY_HEADS, TINY_LAYERS, save_model, tiny_family

# Families whose pair template puts two separators between the segments: <s> A </s></s> B </s>.
DOUBLE_SEPARATOR = {"roberta", "xlm-roberta", "mpnet"}
# Families whose checkpoints embed token types (type_vocab_size 2); the others get none.
TOKEN_TYPES = {"bert", "electra", "albert"}
PAIR = ("The cat sat on the mat.", "It slept well, he said.")


@pytest.fixture(scope="module")
def family_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return {name: tiny_family(name, tmp_path_factory.mktemp(name)) for name in FAMILIES}


@pytest.fixture(params=sorted(FAMILIES))
def family(request: pytest.FixtureRequest, family_dirs: dict[str, Path]) -> tuple[str, LoadedEncoder]:
    return request.param, load_encoder(str(family_dirs[request.param]))


def _pairs(*pairs: tuple[str, str]) -> CorpusData:
    return CorpusData(
        texts=pl.DataFrame(
            {
                "example_id": list(range(len(pairs))),
                "source_ref": [f"test:{index}" for index in range(len(pairs))],
                "text_a": [a for a, _ in pairs],
                "text_b": [b for _, b in pairs],
            },
            schema_overrides={"example_id": pl.Int32},
        )
    )


def _separators(tokenizer: PreTrainedTokenizerBase, ids: list[int]) -> list[int]:
    """Positions of the separators in the tokenizer's own pair encoding (its sep id, added by its template)."""
    return [position for position, token in enumerate(ids) if token == tokenizer.sep_token_id]


def test_registration_reads_each_family(family: tuple[str, LoadedEncoder]):
    name, encoder = family
    spec = inspect_model(encoder.spec.source)
    assert (spec.model_type, spec.n_layers, spec.n_heads) == (
        name,
        TINY_LAYERS,
        TINY_HEADS,
    )  # FAMILIES are named by model type
    assert spec.takes_token_types == (name in TOKEN_TYPES)


def test_special_tokens_and_segments_come_from_the_tokenizer(family: tuple[str, LoadedEncoder]):
    name, encoder = family
    tokenizer = encoder.tokenizer
    tokens = encode_corpus(_pairs(PAIR), tokenizer, 64, None, 0).tokens
    ids = tokens["token_id"].to_list()
    assert ids == tokenizer(*PAIR)["input_ids"]
    classes = tokens["token_class"].to_list()
    separators = _separators(tokenizer, ids)
    assert [p for p, c in enumerate(classes) if c == "cls"] == [0] and ids[0] == tokenizer.cls_token_id
    assert [p for p, c in enumerate(classes) if c == "sep"] == separators
    # the run: two adjacent separators after segment A where the family's template says so
    first = separators[0]
    assert len(separators) == (3 if name in DOUBLE_SEPARATOR else 2)
    assert separators[-1] == len(ids) - 1 and (separators[1] == first + 1) == (name in DOUBLE_SEPARATOR)
    assert set(tokens.filter("is_special")["token_id"]) <= set(tokenizer.all_special_ids)
    # segment 0 up to and including the separator closing A; the second `</s>` of a run opens B
    assert tokens["segment"].to_list() == [0] * (first + 1) + [1] * (len(ids) - first - 1)


def test_special_token_strings_in_the_text_stay_text(family: tuple[str, LoadedEncoder]):
    """Before: a sentence holding '[SEP]' (or '<s>', '</s>') was given the separator's id and class, so
    it split the segment; SentencePiece vocabularies still read '<s>' as its id, but the piece is text."""
    name, encoder = family
    tokenizer = encoder.tokenizer
    lookalike = f"a {tokenizer.sep_token} b {tokenizer.cls_token} c {tokenizer.mask_token}"
    encoded = encode_corpus(_pairs((lookalike, "d")), tokenizer, 96, None, 0)
    tokens = encoded.tokens
    classes = tokens["token_class"].to_list()
    assert classes.count("cls") == 1 and classes.count("sep") == (3 if name in DOUBLE_SEPARATOR else 2)
    assert tokens.filter(pl.col("is_special"))["position"].to_list() == [
        p for p, c in enumerate(classes) if c in ("cls", "sep")
    ]
    # every piece is in its word's segment: the look-alikes split nothing
    pieces = tokens.join(encoded.words, on=["example_id", "word_index"], suffix="_word")
    assert pieces.height > 6 and (pieces["segment"] == pieces["segment_word"]).all()


def test_token_types_only_where_the_model_has_them(family: tuple[str, LoadedEncoder]):
    name, encoder = family
    tokens = encode_corpus(_pairs(PAIR), encoder.tokenizer, 64, None, 0).tokens
    (batch,) = length_batches(tokens, encoder.tokenizer.pad_token_id, 4096, encoder.spec.takes_token_types)
    assert ("token_type_ids" in batch.inputs) == (name in TOKEN_TYPES)
    if name in TOKEN_TYPES:
        reference = encoder.tokenizer(*PAIR, return_token_type_ids=True)["token_type_ids"]
        assert batch.inputs["token_type_ids"][0].tolist() == reference


def test_a_separator_run_is_one_target_of_attention_to_sep(family_dirs: dict[str, Path]):
    """`<s> a </s></s> b </s>`: attention to [SEP] sums every separator (so either `</s>` of the run
    counts, once); [SEP] -> [SEP] and [SEP] -> word average the separator rows. Hand-computed."""
    encoder = load_encoder(str(family_dirs["roberta"]))
    tokens = encode_corpus(_pairs(("a", "b")), encoder.tokenizer, 16, None, 0).tokens
    assert tokens["token_class"].to_list() == ["cls", "other", "sep", "sep", "other", "sep"]
    (batch,) = length_batches(tokens, encoder.tokenizer.pad_token_id, 64, False)
    attention = torch.tensor(
        [
            [0.5, 0.1, 0.2, 0.2, 0.0, 0.0],
            [0.1, 0.1, 0.3, 0.1, 0.2, 0.2],
            [0.0, 0.0, 0.5, 0.5, 0.0, 0.0],
            [0.0, 0.0, 0.25, 0.25, 0.25, 0.25],
            [0.2, 0.2, 0.2, 0.2, 0.2, 0.0],
            [0.0, 0.0, 0.0, 0.0, 0.0, 1.0],
        ]
    )[None, None, None]
    summaries = head_summaries(attention, batch.masks)
    # rows' mass on positions 2, 3 and 5: 0.4, 0.6, 1, 0.75, 0.4, 1
    assert summaries["to_sep"].item() == pytest.approx(4.15 / 6)
    assert summaries["sep_to_sep"].item() == pytest.approx((1 + 0.75 + 1) / 3)
    assert summaries["to_cls"].item() == pytest.approx(0.8 / 6)
    words = torch.tensor([[[0, 1, 0, 0, 0, 0], [0, 0, 0, 0, 1, 0]]], dtype=torch.float32)
    _, root = attention_features(attention, words, batch.masks.cls, batch.masks.sep, "mean")
    # ROOT features: word -> [CLS], word -> [SEP], [CLS] -> word, [SEP] -> word, bias
    assert root[0, :, 0].tolist() == pytest.approx([0.1, 0.6, 0.1, 0.0, 1.0])
    assert root[0, :, 1].tolist() == pytest.approx([0.2, 0.4, 0.0, 0.25 / 3, 1.0])


def _direct_summaries(encoder: LoadedEncoder, pair: tuple[str, str]) -> np.ndarray:
    """(L, H, 3) mass to [CLS], to [SEP] and [SEP] -> [SEP] from the model's own maps of the
    tokenizer's own encoding, positions from the tokenizer's cls/sep ids."""
    tokenizer = encoder.tokenizer
    inputs = tokenizer(*pair, return_tensors="pt", return_token_type_ids=encoder.spec.takes_token_types)
    with torch.no_grad():
        maps = torch.stack(encoder.model(**inputs, output_attentions=True).attentions)[:, 0].numpy()
    ids = inputs["input_ids"][0].tolist()
    separators = _separators(tokenizer, ids)
    to_sep = maps[..., separators].sum(-1)
    return np.stack([maps[..., 0].mean(-1), to_sep.mean(-1), to_sep[..., separators].mean(-1)], -1)


def test_attention_facts_are_the_models_own_maps(family: tuple[str, LoadedEncoder]):
    """The pass (batched, padded, token types as the model takes them) matches a direct forward of the
    tokenizer's own encoding; before nothing checked a family beyond BERT."""
    _, encoder = family
    pairs = (PAIR, ("Yes.", "No, the dog went home."))
    encoded = encode_corpus(_pairs(*pairs), encoder.tokenizer, 64, None, 0)
    facts = extract_attention_facts(encoder, encoded.tokens, batch_tokens=4096).tables["head_summaries"]
    for example_id, pair in enumerate(pairs):
        rows = facts.filter(pl.col("example_id") == example_id).sort("layer", "head")
        got = rows.select("to_cls", "to_sep", "sep_to_sep").to_numpy().reshape(TINY_LAYERS, TINY_HEADS, 3)
        np.testing.assert_allclose(got, _direct_summaries(encoder, pair), atol=1e-5)
    assert facts["row_sum_error"].max() < 1e-5


def test_ablation_disables_heads_of_every_family(family: tuple[str, LoadedEncoder]):
    """Before: DistilBERT and ALBERT (no layer_idx; ALBERT shares one layer) raised, and MPNet and
    DeBERTa (no AttentionInterface) could not be switched to the ablation attention."""
    _, encoder = family
    model = use_ablation_attention(build_classifier(encoder.spec.source, "rte", "pretrained", seed=0).eval())
    inputs = dict(encoder.tokenizer(["The cat sat.", "a dog"], padding=True, return_tensors="pt"))
    disabled = torch.zeros(2, TINY_LAYERS, TINY_HEADS, dtype=torch.bool)
    disabled[1, 1, 2] = True  # setting 1: layer 2, head 3
    with torch.no_grad():
        plain = model(**inputs).logits
        with disabling_heads(disabled[1:], inputs["attention_mask"]):
            maps = model(**inputs, output_attentions=True).attentions
    n_short = int(inputs["attention_mask"][1].sum())
    assert maps[1][1, 2, 0].tolist() == pytest.approx([1 / n_short] * n_short + [0.0] * (maps[1].shape[-1] - n_short))
    assert not torch.allclose(maps[0][1, 2, 0, :n_short], torch.full((n_short,), 1 / n_short))
    logits = ablated_logits(model, inputs, disabled)
    assert torch.allclose(logits[0], plain, atol=1e-6) and not torch.equal(logits[1], logits[0])


def test_layer_norm_weights_are_exempt_from_weight_decay(family_dirs: dict[str, Path]):
    """Before: only names holding 'LayerNorm' were, so DistilBERT's sa_layer_norm / output_layer_norm
    and ALBERT's full_layer_layer_norm weights were decayed."""
    for name, norms in (("distilbert", 2 * TINY_LAYERS + 1), ("albert", 2 + 1)):
        model = build_classifier(str(family_dirs[name]), "rte", "pretrained", seed=0)
        exempt = no_decay_parameters(model)
        layer_norms = [n for n in exempt if n.endswith("weight")]
        assert len(layer_norms) == norms, name
        assert {n for n, _ in model.named_parameters() if n.endswith("bias")} <= exempt


def test_finetuning_reads_special_token_strings_as_text(family_dirs: dict[str, Path]):
    tokenizer = load_encoder(str(family_dirs["bert"])).tokenizer
    texts = pl.DataFrame({"example_id": [0], "text_a": ["a [SEP] b"], "text_b": ["c"], "label": [1]})
    data = encode_task(texts, tokenizer, 64, "drop", "glue_rte").data
    assert data.token_ids[0].tolist().count(tokenizer.sep_token_id) == 2
    assert data.segments[0].tolist() == tokenizer("a [SEP] b", "c", split_special_tokens=True)["token_type_ids"]


UNREADABLE = {
    "longformer": (
        lambda vocab: LongformerModel(
            LongformerConfig(
                vocab_size=vocab,
                hidden_size=32,
                num_hidden_layers=TINY_LAYERS,
                num_attention_heads=TINY_HEADS,
                intermediate_size=64,
                attention_window=4,
                max_position_embeddings=64,
            )
        ),
        r"\(longformer\) returns attention maps of shape \[1, 4, 4, 5\] for 4 input tokens",
    ),
    "funnel": (
        lambda vocab: FunnelModel(
            FunnelConfig(vocab_size=vocab, d_model=32, n_head=TINY_HEADS, d_head=8, d_inner=64, block_sizes=[1, 1])
        ),
        r"\(funnel\) returns 4 attention maps for its 2 layers",
    ),
}


@pytest.mark.parametrize("kind", UNREADABLE)
def test_models_whose_attention_cannot_be_read_are_refused(
    kind: str, tmp_path: Path, tokenizer: PreTrainedTokenizerBase
):
    build, reason = UNREADABLE[kind]
    folder = save_model(tmp_path / kind, build(tokenizer.vocab_size), tokenizer)
    with pytest.raises(ModelLoadError, match=f"(?s){reason}.*cannot be read that way.*Register an encoder"):
        inspect_model(str(folder))
