"""Gradient importance (Clark §3.2): masking, gradients against finite differences and a
brute-force average, the loss heads, the asset and the view, on tiny random models."""

from pathlib import Path

import polars as pl
import pytest
import torch
from transformers.models.bert import modeling_bert

from dagster_project.compute.backoff import PassOutOfMemory
from dagster_project.compute.batching import length_batches
from dagster_project.compute.clark.gradients import (
    CLASSIFICATION,
    IGNORE_LABEL,
    MASKED_LM,
    REGRESSION,
    TARGET_TYPES,
    LossModel,
    NoLossHead,
    attention_gradients,
    check_labels,
    extract_grad_importance,
    grad_sums,
    load_loss_model,
    loss_name_for,
    mask_tokens,
)
from tests.out_of_memory import out_of_memory_above
from tests.tiny_models import TINY_HEADS, TINY_LAYERS

PAIRS = [("The cat sat on the mat.", "It was, in fact, asleep."), ("Dogs bark.", "Birds sing, loudly.")]


def _tokens(tokenizer, pairs: list[tuple[str, str]]) -> pl.DataFrame:
    """A `tokens` frame as the corpus assets write it."""
    rows = []
    for example_id, (a, b) in enumerate(pairs):
        encoded = tokenizer(a, b)
        for position, (token_id, segment) in enumerate(zip(encoded["input_ids"], encoded["token_type_ids"])):
            token = tokenizer.convert_ids_to_tokens(token_id)
            token_class = {"[CLS]": "cls", "[SEP]": "sep", ".": "punct", ",": "punct"}.get(token, "other")
            rows.append((example_id, position, token_id, token_class, segment))
    return pl.DataFrame(rows, schema=["example_id", "position", "token_id", "token_class", "segment"], orient="row")


def _mlm(tiny_mlm_dir: Path) -> LossModel:
    loaded = load_loss_model(str(tiny_mlm_dir))
    assert isinstance(loaded, LossModel) and loaded.loss_name == MASKED_LM
    return loaded


def test_loss_name_follows_the_architecture():
    assert loss_name_for(["BertForMaskedLM"], 2) == MASKED_LM
    assert loss_name_for(["BertForPreTraining"], 2) == MASKED_LM
    assert loss_name_for(["RobertaForSequenceClassification"], 3) == CLASSIFICATION
    assert loss_name_for(["BertForSequenceClassification"], 1) == REGRESSION
    assert loss_name_for(["BertModel"], 2) is None
    assert loss_name_for(None, 2) is None


def test_masking_follows_bert_pretraining(tokenizer):
    tokens = _tokens(tokenizer, PAIRS * 200)
    masked = mask_tokens(tokens, tokenizer.mask_token_id, tokenizer.vocab_size, seed=3)
    assert masked.equals(mask_tokens(tokens, tokenizer.mask_token_id, tokenizer.vocab_size, seed=3))
    assert not masked.equals(mask_tokens(tokens, tokenizer.mask_token_id, tokenizer.vocab_size, seed=4))
    joined = tokens.join(masked, on=["example_id", "position"], suffix="_in")
    predicted = joined.filter(pl.col("label") != IGNORE_LABEL)
    # Example 0 has 15 maskable pieces -> round(2.25) = 2 predicted; example 1 has 8 -> round(1.2) = 1.
    per_example = predicted.group_by("example_id").len().sort("example_id")["len"].to_list()
    assert per_example == [2, 1] * 200
    assert set(predicted["token_class"]) <= {"other", "punct"}  # never [CLS] or [SEP]
    assert (predicted["label"] == predicted["token_id"]).all()
    assert (
        joined.filter(pl.col("label") == IGNORE_LABEL)
        .select((pl.col("token_id") == pl.col("token_id_in")).all())
        .item()
    )
    share_masked = (predicted["token_id_in"] == tokenizer.mask_token_id).mean()
    share_kept = (predicted["token_id_in"] == predicted["token_id"]).mean()
    assert 0.75 < share_masked < 0.85 and 0.06 < share_kept < 0.14  # 80% / 10% kept, 600 draws
    changed = joined.filter(pl.col("token_id_in") != pl.col("token_id"))
    assert (changed["token_class_in"] == "other").all()


def _perturbed_attention(layer_index: int, head: int, query: int, key: int, delta: float):
    """An eager attention that adds `delta` to one attention weight of one layer."""

    def attention(module, query_states, key_states, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
        scores = torch.matmul(query_states, key_states.transpose(2, 3)) * (scaling or query_states.size(-1) ** -0.5)
        weights = torch.softmax(scores + attention_mask if attention_mask is not None else scores, dim=-1)
        if module.layer_idx == layer_index:
            weights = weights.clone()
            weights[0, head, query, key] += delta
        return torch.matmul(weights, value).transpose(1, 2).contiguous(), weights

    return attention


def test_gradient_matches_finite_differences(tiny_mlm_dir: Path, tokenizer, monkeypatch: pytest.MonkeyPatch):
    loss_model = _mlm(tiny_mlm_dir)
    model = loss_model.model.double()
    try:
        masked = mask_tokens(_tokens(tokenizer, PAIRS[:1]), tokenizer.mask_token_id, tokenizer.vocab_size, seed=0)
        batch = next(length_batches(masked, 0, 4096, True))
        labels = torch.tensor(masked.sort("position")["label"].to_list())[None]
        gradients = attention_gradients(model, batch.inputs, labels, MASKED_LM)
        assert gradients.shape == (1, TINY_LAYERS, TINY_HEADS, 18, 18)

        def loss_with(delta: float, where: tuple[int, int, int, int]) -> float:
            monkeypatch.setattr(modeling_bert, "eager_attention_forward", _perturbed_attention(*where, delta))
            with torch.no_grad():
                logits = model(**batch.inputs).logits
            monkeypatch.undo()
            return torch.nn.functional.cross_entropy(logits[0], labels[0], ignore_index=IGNORE_LABEL).item()

        step = 1e-5
        for where in [(0, 1, 3, 0), (1, 2, 5, 8), (1, 0, 17, 16)]:  # 0-based layer, head, query, key
            numeric = (loss_with(step, where) - loss_with(-step, where)) / (2 * step)
            layer, head, query, key = where
            assert gradients[0, layer, head, query, key].item() == pytest.approx(numeric, rel=1e-5, abs=1e-9)
    finally:
        model.float()


def test_vectorized_sums_match_brute_force(tiny_mlm_dir: Path, tokenizer):
    loss_model = _mlm(tiny_mlm_dir)
    masked = mask_tokens(_tokens(tokenizer, PAIRS), tokenizer.mask_token_id, tokenizer.vocab_size, seed=1)
    batch = next(length_batches(masked, 0, 4096, True))
    assert len(batch.example_ids) == 2  # one padded batch
    labels = torch.nn.utils.rnn.pad_sequence(
        [
            torch.tensor(masked.filter(pl.col("example_id") == int(e)).sort("position")["label"].to_list())
            for e in batch.example_ids
        ],
        batch_first=True,
        padding_value=IGNORE_LABEL,
    )
    gradients = attention_gradients(loss_model.model, batch.inputs, labels, MASKED_LM)
    sums, counts = grad_sums(gradients, batch.masks)
    masks = batch.masks
    for b in range(2):
        n = int(masks.valid[b].sum())
        types = ["sep" if masks.sep[b, k] else "punct" if masks.punct[b, k] else "other" for k in range(n)]
        for c, target in enumerate(TARGET_TYPES):
            keys = [k for k in range(n) if types[k] == target]
            assert counts[b, c].item() == n * len(keys)
            for layer in range(TINY_LAYERS):
                for head in range(TINY_HEADS):
                    expected = sum(abs(gradients[b, layer, head, q, k].item()) for q in range(n) for k in keys)
                    assert sums[b, layer, head, c].item() == pytest.approx(expected, rel=1e-5)
    # Each example's gradients are its own: the shorter, padded example alone gives the same.
    short = int(masks.valid.sum(-1).argmin())
    alone = next(length_batches(masked.filter(pl.col("example_id") == int(batch.example_ids[short])), 0, 4096, True))
    alone_gradients = attention_gradients(
        loss_model.model, alone.inputs, labels[short : short + 1, : alone.inputs["input_ids"].shape[1]], MASKED_LM
    )
    n = alone.inputs["input_ids"].shape[1]
    torch.testing.assert_close(alone_gradients[0], gradients[short, :, :, :n, :n], rtol=1e-4, atol=1e-9)


def test_masked_lm_rows_per_layer_and_target_type(tiny_mlm_dir: Path, tokenizer):
    facts = extract_grad_importance(_mlm(tiny_mlm_dir), _tokens(tokenizer, PAIRS), seed=0)
    rows = facts.rows
    assert facts.n_examples == 2
    assert rows.height == 2 * TINY_LAYERS * TINY_HEADS * 3  # both examples have [SEP], punctuation, other
    assert rows["grad_sum"].is_finite().all() and (rows["grad_sum"] > 0).all()
    # Example 0: 18 pieces, 2 of them [SEP]; every (query, key) weight counted once.
    counts = rows.filter((pl.col("example_id") == 0) & (pl.col("layer") == 1) & (pl.col("head") == 1)).sort(
        "target_type"
    )
    assert counts["weight_count"].sum() == 18 * 18 and counts["weight_count"][0] == 18 * 2
    per_layer = rows.group_by("layer", "target_type").agg(
        magnitude=pl.col("grad_sum").sum() / pl.col("weight_count").sum()
    )
    assert per_layer.height == TINY_LAYERS * len(TARGET_TYPES)
    assert per_layer["magnitude"].is_finite().all() and (per_layer["magnitude"] > 0).all()


def test_sequence_classification_uses_the_labels(tiny_classifier_dir: Path, tokenizer):
    loss_model = load_loss_model(str(tiny_classifier_dir))
    assert isinstance(loss_model, LossModel) and loss_model.loss_name == CLASSIFICATION
    examples = pl.DataFrame({"example_id": [0, 1, 2], "label": [2.0, None, 0.0]})
    labels = check_labels(examples, CLASSIFICATION, 3, "demo")
    assert labels["example_id"].to_list() == [0, 2] and labels["label"].dtype == pl.Int64
    facts = extract_grad_importance(loss_model, _tokens(tokenizer, PAIRS * 2), seed=0, labels=labels)
    assert facts.n_examples == 2 and set(facts.rows["example_id"]) == {0, 2}
    assert facts.rows["grad_sum"].is_finite().all() and (facts.rows["grad_sum"] > 0).all()
    # Another label changes the loss, so the gradients.
    relabelled = extract_grad_importance(
        loss_model, _tokens(tokenizer, PAIRS * 2), seed=0, labels=labels.with_columns(label=pl.lit(1, dtype=pl.Int64))
    )
    assert not relabelled.rows["grad_sum"].equals(facts.rows["grad_sum"])
    with pytest.raises(ValueError, match="example 1 has label 3.0"):
        check_labels(pl.DataFrame({"example_id": [0, 1], "label": [0.0, 3.0]}), CLASSIFICATION, 3, "demo")


def test_model_without_a_loss_head_has_a_reason(tiny_model_dir: Path):
    loaded = load_loss_model(str(tiny_model_dir))
    assert isinstance(loaded, NoLossHead) and "BertModel" in loaded.reason


def test_out_of_memory_halves_the_batch_and_gives_the_small_batch_rows(tiny_mlm_dir: Path, tokenizer, caplog):
    loss_model, tokens = _mlm(tiny_mlm_dir), _tokens(tokenizer, PAIRS * 4)  # 8 examples of 10 and 18 pieces
    with caplog.at_level("WARNING"), out_of_memory_above(loss_model.model, 40) as tried:
        retried = extract_grad_importance(loss_model, tokens, seed=0, batch_tokens=160)
    assert [record.getMessage() for record in caplog.records] == [
        "Gradient importance: out of memory on cpu at 160 padded positions per batch (batch_tokens), retrying at 80",
        "Gradient importance: out of memory on cpu at 80 padded positions per batch (batch_tokens), retrying at 40",
    ]
    assert max(tried) > 40 and max(tried[-4:]) <= 40  # the last pass's batches fit
    reference = extract_grad_importance(loss_model, tokens, seed=0, batch_tokens=40)
    assert retried.n_examples == reference.n_examples == 8
    assert retried.rows.sort("example_id", "layer", "head", "target_type").equals(
        reference.rows.sort("example_id", "layer", "head", "target_type")
    )


def test_out_of_memory_with_one_example_per_batch_names_what_to_lower(tiny_mlm_dir: Path, tokenizer):
    loss_model = _mlm(tiny_mlm_dir)
    with out_of_memory_above(loss_model.model, None), pytest.raises(PassOutOfMemory) as raised:
        extract_grad_importance(loss_model, _tokens(tokenizer, PAIRS), seed=0, batch_tokens=64)
    message = str(raised.value)
    assert message.startswith("Gradient importance: out of memory on cpu even at its smallest size")
    assert "(batch_tokens): 18)" in message and "max_len" in message and "Nothing was written" in message
