"""Uniform-attention head ablation on tiny random-weight classifiers."""

from pathlib import Path

import pytest
import torch

from dagster_project.compute.backoff import PassOutOfMemory
from dagster_project.compute.kovaleva.ablation import (
    ablated_logits,
    ablation_settings,
    disabling_heads,
    settings_logits,
    uniform_ablation_attention,
    use_ablation_attention,
    validation_logits,
)
from dagster_project.compute.kovaleva.finetuning import build_classifier
from dagster_project.compute.kovaleva.task_data import TaskData
from tests.out_of_memory import out_of_memory_above
from tests.tiny_models import TINY_HEADS, TINY_LAYERS


@pytest.fixture(scope="module")
def classifier(tiny_model_dir: Path) -> torch.nn.Module:
    return use_ablation_attention(build_classifier(str(tiny_model_dir), "rte", "pretrained", seed=0).eval())


@pytest.fixture
def inputs() -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(1000, 2000, (3, 7), generator=generator)
    mask = torch.tensor([[1] * 7, [1] * 5 + [0] * 2, [1] * 3 + [0] * 4])
    return {"input_ids": ids * mask, "attention_mask": mask, "token_type_ids": torch.zeros_like(ids)}


def test_disabled_head_rows_are_exactly_one_over_n():
    generator = torch.Generator().manual_seed(1)
    query, key, value = (torch.randn(2, 3, 4, 5, generator=generator) for _ in range(3))
    valid = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]], dtype=torch.bool)
    additive = torch.zeros(2, 1, 4, 4).masked_fill(~valid[:, None, None, :], torch.finfo(torch.float32).min)
    disabled = torch.zeros(1, 2, 3, dtype=torch.bool)
    disabled[0, 1, 2] = True  # layer index 1, head index 2
    module = torch.nn.Module()
    _, eager = uniform_ablation_attention(module, query, key, value, additive)
    with disabling_heads(disabled, valid):
        # the first call is layer index 0: the mask disables nothing there
        _, untouched = uniform_ablation_attention(module, query, key, value, additive)
        output, weights = uniform_ablation_attention(module, query, key, value, additive)
    assert torch.equal(untouched, eager)
    assert torch.equal(weights[0, 2], torch.full((4, 4), 0.25))
    assert torch.equal(weights[1, 2], torch.tensor([[0.5, 0.5, 0.0, 0.0]] * 4))
    # other heads keep softmax attention; the output is the uniform mean of the real values
    assert torch.equal(weights[:, :2], eager[:, :2])
    assert torch.allclose(output[1, :, 2], value[1, 2, :2].mean(0).expand(4, 5))


def test_a_model_whose_attention_misses_the_hook_is_an_error(tiny_model_dir: Path, inputs: dict):
    eager = build_classifier(str(tiny_model_dir), "rte", "pretrained", seed=0).eval()
    with pytest.raises(RuntimeError, match="saw 0 attention calls for a 2-layer model"):
        ablated_logits(eager, inputs, torch.zeros(1, TINY_LAYERS, TINY_HEADS, dtype=torch.bool))


def test_no_disabled_head_reproduces_the_baseline_exactly(
    tiny_model_dir: Path, classifier: torch.nn.Module, inputs: dict
):
    eager = build_classifier(str(tiny_model_dir), "rte", "pretrained", seed=0).eval()
    with torch.no_grad():
        baseline = eager(**inputs).logits
    none_disabled = torch.zeros(1, TINY_LAYERS, TINY_HEADS, dtype=torch.bool)
    assert torch.equal(ablated_logits(classifier, inputs, none_disabled)[0], baseline)


def test_model_attention_of_a_disabled_head_is_uniform_over_real_tokens(classifier: torch.nn.Module, inputs: dict):
    disabled = torch.zeros(1, TINY_LAYERS, TINY_HEADS, dtype=torch.bool)
    disabled[0, 1, 3] = True
    with torch.no_grad(), disabling_heads(disabled, inputs["attention_mask"]):
        attentions = classifier(**inputs, output_attentions=True).attentions
    assert torch.equal(attentions[1][2, 3, 0], torch.tensor([1 / 3] * 3 + [0.0] * 4))
    assert torch.equal(attentions[1][1, 3, 4], torch.tensor([0.2] * 5 + [0.0] * 2))
    assert not torch.allclose(attentions[1][2, 2, 0, :3], torch.full((3,), 1 / 3))  # a kept head


def test_settings_are_baseline_then_heads_then_layers():
    settings = ablation_settings(2, 3)
    assert settings.disabled.shape == (1 + 6 + 2, 2, 3)
    assert settings.disabled.sum(dim=(1, 2)).tolist() == [0, 1, 1, 1, 1, 1, 1, 3, 3]
    assert settings.disabled[5, 1, 1] and settings.layer[5] == 2 and settings.head[5] == 2
    assert settings.disabled[7, 0].all() and not settings.disabled[7, 1].any()
    assert settings.layer == [None, 1, 1, 1, 2, 2, 2, 1, 2]
    assert settings.head == [None, 1, 2, 3, 1, 2, 3, None, None]


def test_settings_in_one_pass_match_each_setting_alone(classifier: torch.nn.Module, inputs: dict):
    settings = ablation_settings(TINY_LAYERS, TINY_HEADS)
    together = settings_logits(classifier, [inputs], settings.disabled, batch_tokens=10**6)
    in_chunks = settings_logits(classifier, [inputs], settings.disabled, batch_tokens=1)  # one setting per pass
    assert together.shape == (1 + TINY_LAYERS * TINY_HEADS + TINY_LAYERS, 3, 2)
    assert torch.allclose(together, in_chunks, atol=1e-6)
    assert not torch.equal(
        together[1], together[0]
    )  # disabling a head changes the logits (a little: random weights attend nearly uniformly)


def _validation(n: int) -> TaskData:
    """n examples of 4 to 9 random pieces, alternating labels."""
    generator = torch.Generator().manual_seed(1)
    ids = [torch.randint(1000, 2000, (4 + index % 6,), generator=generator) for index in range(n)]
    return TaskData(
        list(range(n)), ids, [torch.zeros(len(row), dtype=torch.long) for row in ids], torch.arange(n) % 2.0
    )


def _validation_logits(classifier: torch.nn.Module, batch_tokens: int) -> torch.Tensor:
    settings = ablation_settings(TINY_LAYERS, TINY_HEADS)
    return validation_logits(
        classifier,
        _validation(10),
        settings.disabled,
        pad_token_id=0,
        with_token_types=True,
        eval_batch_size=4,
        batch_tokens=batch_tokens,
        what="rte head ablation",
        progress=lambda done, total, seconds: None,
    )


def test_out_of_memory_halves_the_pass_and_gives_the_small_pass_logits(classifier: torch.nn.Module, caplog):
    with caplog.at_level("WARNING"), out_of_memory_above(classifier, 20) as tried:
        retried = _validation_logits(classifier, 400)
    assert [record.getMessage() for record in caplog.records] == [
        f"rte head ablation: out of memory on cpu at {budget} padded positions per forward pass (batch_tokens), "
        f"retrying at {budget // 2}"
        for budget in (400, 200, 100, 50, 25)
    ]
    # at 25, a batch of 4 examples of 7 pieces goes 3 at a time (21 positions); at 12, 1 at a time
    assert max(tried) > 20 and max(tried[-5:]) <= 20
    # in example order, each example's logits the same as when it goes through alone under one setting
    reference = _validation_logits(classifier, 1)
    assert retried.shape == (1 + TINY_LAYERS * TINY_HEADS + TINY_LAYERS, 10, 2)
    torch.testing.assert_close(retried, reference, atol=1e-6, rtol=1e-5)
    alone = ablated_logits(classifier, {"input_ids": _validation(10).token_ids[3][None]}, torch.zeros(1, 2, 4))
    torch.testing.assert_close(retried[0, 3], alone[0, 0], atol=1e-6, rtol=1e-5)


def test_out_of_memory_under_one_setting_and_one_example_names_what_to_lower(classifier: torch.nn.Module):
    with out_of_memory_above(classifier, None), pytest.raises(PassOutOfMemory) as raised:
        _validation_logits(classifier, 64)
    message = str(raised.value)
    assert message.startswith("rte head ablation: out of memory on cpu even at its smallest size")
    assert "(batch_tokens): 9)" in message and "Lower max_len or max_examples" in message
