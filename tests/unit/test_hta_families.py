"""HTA of every encoder family against torch.autograd.functional.jacobian on tiny random models.

The reference is built from the model's own outputs only: attention probabilities (output_attentions)
times the value projection of the layer's input, o_l = A_l (x_l W_V + b_V), as a function of a layer
input injected by a forward pre-hook. It shares no code with compute/pascual/hta.py or the layout registry.
"""

from functools import cache

import polars as pl
import pytest
import torch
from transformers import GPT2Config, GPT2Model

from dagster_project.compute.attention_layouts import ATTENTION_LAYOUTS
from dagster_project.compute.models import load_encoder
from dagster_project.compute.pascual.hta import (
    HtaMethod,
    attention_weights,
    context_function,
    input_norms,
    layer_input_norms,
    previous_layer_norms,
    replayed_layer_norms,
)
from dagster_project.compute.pascual.hta_facts import estimate_check_error, extract_hta_facts
from dagster_project.corpora import encode_corpus, read_demo_pairs
from tests.tiny_models import FAMILIES, TINY_HEADS, TINY_LAYERS, family_config, tiny_family

N = 5
# Per family: the layer modules (in call order) and each layer's value projection, by path.
LAYER_PATHS = {
    "bert": "encoder.layer",
    "roberta": "encoder.layer",
    "xlm-roberta": "encoder.layer",
    "electra": "encoder.layer",
    "distilbert": "transformer.layer",
    "mpnet": "encoder.layer",
    "deberta-v2": "encoder.layer",
}
VALUE_PATHS = {
    "distilbert": "attention.v_lin",
    "albert": "attention.value",
    "mpnet": "attention.attn.v",
    "deberta-v2": "attention.self.value_proj",
}
CLOSED_FORM = [name for name in FAMILIES if name != "deberta-v2"]


def _layers(name: str, model) -> list:
    if name == "albert":  # one shared layer, run TINY_LAYERS times
        return [model.encoder.albert_layer_groups[0].albert_layers[0]] * TINY_LAYERS
    return list(model.get_submodule(LAYER_PATHS[name]))


@cache
def _tiny(name: str) -> tuple[str, torch.nn.Module, torch.Tensor, torch.Tensor]:
    """(name, tiny float64 model, input ids (1, N), layer inputs (L, N, D)). initializer_range 0.3
    makes attention far from uniform, so the score terms of the Jacobian weigh."""
    tokenizer = FAMILIES[name].tokenizer()
    torch.manual_seed(0)
    config = family_config(name, tokenizer, attn_implementation="eager", initializer_range=0.3)
    model = FAMILIES[name].model_class(config).eval().double()
    ids = torch.randint(5, len(tokenizer), (1, N), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        output = model(input_ids=ids, output_hidden_states=True, output_attentions=True)
    assert torch.stack(output.attentions).amax(-1).mean() > 0.5  # peaked rows: the softmax terms matter
    return name, model, ids, torch.stack(output.hidden_states[:-1])[:, 0]


@pytest.fixture(params=list(FAMILIES))
def family(request) -> tuple[str, torch.nn.Module, torch.Tensor, torch.Tensor]:
    return _tiny(request.param)


def _reference_contexts(name: str, model, ids: torch.Tensor, layer: int, x: torch.Tensor) -> torch.Tensor:
    """Contexts of layers layer..L-1, (L - layer, N, H, dh), with layer `layer`'s input replaced by x (N, D)."""
    layers = _layers(name, model)
    calls = [0]

    def inject(_module, args, kwargs):
        calls[0] += 1
        if calls[0] - 1 == layer:
            return (x[None], *args[1:]), kwargs
        return None

    handles = [
        module.register_forward_pre_hook(inject, with_kwargs=True) for module in {id(m): m for m in layers}.values()
    ]
    try:
        output = model(input_ids=ids, output_hidden_states=True, output_attentions=True)
    finally:
        for handle in handles:
            handle.remove()
    contexts = []
    for index in range(layer, TINY_LAYERS):
        inputs = x if index == layer else output.hidden_states[index][0]
        values = layers[index].get_submodule(VALUE_PATHS.get(name, "attention.self.value"))(inputs)
        values = values.view(N, TINY_HEADS, -1).transpose(0, 1)  # (H, N, dh)
        contexts.append((output.attentions[index][0] @ values).transpose(0, 1))  # (N, H, dh)
    return torch.stack(contexts)


def _jacobian_norms(function, x: torch.Tensor) -> torch.Tensor:
    """||d out_j / d x_i||_F from the full Jacobian of out (K, n, H, dh) w.r.t. x (n, D): (K, H, j, i)."""
    jacobian = torch.autograd.functional.jacobian(function, x, vectorize=True)  # (K, n, H, dh, n, D)
    return jacobian.pow(2).sum((-1, -3)).sqrt().movedim(-2, -3)


def test_context_function_reads_every_heads_context(family):
    name, model, ids, hidden = family
    with torch.no_grad():
        contexts = context_function(model)(hidden[:1])
        reference = _reference_contexts(name, model, ids, 0, hidden[0])
    assert contexts.shape == (TINY_LAYERS, N, TINY_HEADS, 32 // TINY_HEADS)
    torch.testing.assert_close(contexts, reference, atol=1e-12, rtol=1e-10)


def test_previous_layer_contribution_matches_autograd(family):
    name, model, ids, hidden = family
    norms, jvps = layer_input_norms(model, hidden)
    for layer in range(TINY_LAYERS):
        reference = _jacobian_norms(
            lambda x, layer=layer: _reference_contexts(name, model, ids, layer, x)[:1], hidden[layer]
        )
        torch.testing.assert_close(norms[layer], reference[0], atol=1e-10, rtol=1e-8)
    # DeBERTa's disentangled scores have no closed form: one jvp per coordinate of each layer's input.
    assert jvps == (TINY_LAYERS * N * 32 if name == "deberta-v2" else 0)
    first, _ = layer_input_norms(model, hidden[:1])  # the first layer alone, as estimate(k) takes it
    torch.testing.assert_close(first, norms[:1], atol=1e-12, rtol=1e-10)


def test_input_contribution_matches_autograd(family):
    name, model, ids, hidden = family
    exact = input_norms(model, hidden[0], HtaMethod(None))
    reference = _jacobian_norms(lambda x: _reference_contexts(name, model, ids, 0, x), hidden[0])
    torch.testing.assert_close(exact, reference, atol=1e-10, rtol=1e-8)
    # estimate(k): layer 1 takes the exact previous-layer norms in every family.
    estimated = input_norms(model, hidden[0], HtaMethod(2))
    torch.testing.assert_close(estimated[0], reference[0], atol=1e-10, rtol=1e-8)


@pytest.mark.parametrize("name", CLOSED_FORM)
def test_replay_fallback_agrees_with_the_closed_form(name):
    _, model, _, hidden = _tiny(name)
    torch.testing.assert_close(
        replayed_layer_norms(model, hidden),
        previous_layer_norms(attention_weights(model), hidden),
        atol=1e-10,
        rtol=1e-8,
    )


def test_mpnet_closed_form_needs_its_position_bias():
    name, model, ids, hidden = _tiny("mpnet")
    weights = attention_weights(model)
    without = type(weights)(weights.query, weights.key, weights.value, weights.scaling)
    reference = _jacobian_norms(lambda x: _reference_contexts(name, model, ids, 0, x)[:1], hidden[0])[0]
    assert (previous_layer_norms(without, hidden)[0] - reference).abs().max() > 1e-3


def test_deberta_has_no_closed_form():
    _, model, _, _ = _tiny("deberta-v2")
    with pytest.raises(NotImplementedError, match="layer_input_norms"):
        attention_weights(model)


def test_every_family_has_a_layout():
    assert set(FAMILIES) <= set(ATTENTION_LAYOUTS)
    assert [name for name, layout in ATTENTION_LAYOUTS.items() if not layout.closed_form] == ["deberta-v2"]
    assert set(CLOSED_FORM) == {name for name in FAMILIES if ATTENTION_LAYOUTS[name].closed_form}


def test_unknown_family_is_refused_with_the_fix():
    model = GPT2Model(GPT2Config(n_layer=1, n_head=2, n_embd=8, vocab_size=10))
    with pytest.raises(NotImplementedError, match="model_type 'gpt2'.*ATTENTION_LAYOUTS"):
        context_function(model)


@pytest.mark.parametrize("name", ["albert", "deberta-v2"])
def test_hta_facts_of_a_loaded_family_record_the_fallback_cost(tmp_path, name):
    # Loaded from disk as a run loads it; the shortest demo example. ALBERT's e^0 is its layer input
    # (hidden size 32), not its 16-wide embeddings; DeBERTa's previous layer takes L * n * D jvps.
    encoder = load_encoder(str(tiny_family(name, tmp_path)))
    tokens = encode_corpus(read_demo_pairs(), encoder.tokenizer, 128, 4, 0).tokens
    shortest = tokens.group_by("example_id").len().sort("len", "example_id").row(0)
    tokens = tokens.filter(pl.col("example_id") == shortest[0])
    facts = extract_hta_facts(encoder, tokens, HtaMethod(2))
    assert facts.previous_layer_cost.jvps == (TINY_LAYERS * shortest[1] * 32 if name == "deberta-v2" else 0)
    assert facts.previous_layer_cost.method == ("per-layer jvp (exact)" if name == "deberta-v2" else "closed form")
    sums = facts.example_maps.group_by("layer", "head", "query").agg(pl.col("previous_layer", "input").sum())
    assert sums.height == TINY_LAYERS * TINY_HEADS * shortest[1]
    assert (sums["previous_layer"] - 1).abs().max() < 1e-5 and (sums["input"] - 1).abs().max() < 1e-5
    check = estimate_check_error(encoder, tokens, HtaMethod(32), 1)
    # 32 orthonormal probes per token span D = 32: the estimate is exact on layer 2.
    assert check.examples == [shortest[0]] and check.error.layer_pearson[2] == pytest.approx(1.0, abs=1e-5)
    assert max(check.published_gaps["center_of_mass"].values()) < 1e-4
