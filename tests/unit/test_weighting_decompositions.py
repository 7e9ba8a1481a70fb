"""GlobEnc, ALTI and value zeroing (compute/weightings.py, docs/methods.md §3.9) on a tiny random model of
every encoder family, against plain loops of each paper's formula over the model's own weights and states:
value zeroing re-runs the model once per (layer, zeroed token)."""

import dataclasses
from pathlib import Path

import pytest
import torch
from torch import nn

from dagster_project.compute import attention_layouts
from dagster_project.compute.attention_layouts import attention_blocks, attention_layout
from dagster_project.compute.models import LoadedEncoder, load_encoder
from dagster_project.compute.weightings import (
    LAYER_DECOMPOSITIONS,
    captured_layers,
    encoder_layer_parts,
    weighted_maps,
)
from tests.tiny_models import FAMILIES, tiny_family

TEXTS = ("the cat sat on the mat.", "a dog slept well, and the quick brown fox was not home")


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def family_encoder(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> LoadedEncoder:
    """The family's tiny model with its output projections scaled up: at initialization scale (ALBERT's
    above all) the attention moves a layer's output so little that zeroing one value vector changes its
    cosine by float32's rounding alone, and value zeroing would compare noise."""
    encoder = load_encoder(str(tiny_family(request.param, tmp_path_factory.mktemp(request.param))))
    layout = attention_layout(encoder.model)
    with torch.no_grad():
        for block in {id(block): block for block in attention_blocks(encoder.model)}.values():
            block.get_submodule(layout.output).weight.mul_(20)
    return encoder


def _inputs(encoder: LoadedEncoder, texts: tuple[str, ...]) -> dict:
    inputs = dict(encoder.tokenizer(list(texts), return_tensors="pt", padding=True))
    if not encoder.spec.takes_token_types:
        inputs.pop("token_type_ids", None)
    return inputs


def _decomposed(encoder: LoadedEncoder, texts: tuple[str, ...]) -> tuple[dict, dict[str, torch.Tensor]]:
    """The pass's maps of the three weightings for a padded batch of `texts`, and as `<name> own` the layers'
    own maps of the two that roll out (WeightedMaps.layer_maps)."""
    inputs = _inputs(encoder, texts)
    parts = encoder_layer_parts(encoder.model, encoder.spec.n_heads)
    with torch.inference_mode(), captured_layers(encoder.model, with_norms=True) as captured:
        output = encoder.model(**inputs, output_attentions=True)
        attn = torch.stack(output.attentions, dim=1).float()
        weightings = ("attention", *LAYER_DECOMPOSITIONS)
        weighted = weighted_maps(attn, weightings, inputs["attention_mask"].bool(), captured.take(), None, parts)
    return inputs, weighted.maps | {f"{name} own": own for name, own in weighted.layer_maps.items()}


def _norm_inputs(encoder: LoadedEncoder, inputs: dict) -> tuple[list, list, list, tuple]:
    """One example's forward: per layer the residual and output LayerNorms' inputs (test hooks), the
    attention maps and hidden states."""
    layout = attention_layout(encoder.model)
    layers = layout.layers(encoder.model.base_model)
    seen: dict[str, list[torch.Tensor]] = {"residual": [], "output": []}
    handles = []
    for role, path in (("residual", layout.residual_norm), ("output", layout.output_norm)):
        for module in {id(layer.get_submodule(path)): layer.get_submodule(path) for layer in layers}.values():
            handles.append(module.register_forward_hook(lambda _m, args, _o, role=role: seen[role].append(args[0][0])))
    with torch.inference_mode():
        output = encoder.model(**inputs, output_attentions=True, output_hidden_states=True)
    for handle in handles:
        handle.remove()
    return seen["residual"], seen["output"], [a[0] for a in output.attentions], output.hidden_states


def _plain_parts(encoder: LoadedEncoder, layer: int, x: torch.Tensor, attn: torch.Tensor) -> list[list[torch.Tensor]]:
    """A_ij + [i = j] x_i for every (i, j): sum over heads of alpha^h_ij (x_j W_V^h + b_V^h) W_O^h, head by head."""
    layout = attention_layout(encoder.model)
    block = attention_blocks(encoder.model)[layer]
    value, output = block.get_submodule(layout.value), block.get_submodule(layout.output)
    n_heads, n = attn.shape[0], x.shape[0]
    d_head = value.weight.shape[0] // n_heads
    transformed = []
    for j in range(n):
        v = value.weight @ x[j] + value.bias
        transformed.append(
            [output.weight[:, h * d_head : (h + 1) * d_head] @ v[h * d_head : (h + 1) * d_head] for h in range(n_heads)]
        )
    return [
        [sum(attn[h, i, j] * transformed[j][h] for h in range(n_heads)) + (x[i] if i == j else 0) for j in range(n)]
        for i in range(n)
    ]


def _share(z: torch.Tensor, norm: nn.LayerNorm, y: torch.Tensor) -> torch.Tensor:
    """gamma (z - mean z) / sqrt(var(y) + eps): the LayerNorm's linear part of one summand z of its input y."""
    return norm.weight * (z - z.mean()) / torch.sqrt(((y - y.mean()) ** 2).mean() + norm.eps)


def _matmul(a: list[list[float]], b: list[list[float]]) -> list[list[float]]:
    n = len(a)
    return [[sum(a[i][k] * b[k][j] for k in range(n)) for j in range(n)] for i in range(n)]


def _row_normalized(rows: list[list[float]]) -> torch.Tensor:
    return torch.tensor([[value / sum(row) for value in row] for row in rows])


def _plain_globenc_and_alti(encoder: LoadedEncoder, inputs: dict) -> dict[str, torch.Tensor]:
    """Modarressi et al.'s N_Enc rolled out, and Ferrando et al.'s ALTI, of one example, and as `<name> own`
    each layer's own N_Enc and c, rows normalized: (L, n, n) each."""
    layout = attention_layout(encoder.model)
    layers = layout.layers(encoder.model.base_model)
    residual_in, output_in, attentions, hidden = _norm_inputs(encoder, inputs)
    globenc, alti, own_n, own_c, rolled_n, rolled_c = [], [], [], [], None, None
    with torch.inference_mode():
        for layer, module in enumerate(layers):
            ln1, ln2 = module.get_submodule(layout.residual_norm), module.get_submodule(layout.output_norm)
            x, y, y2 = hidden[layer][0], residual_in[layer], output_in[layer]
            parts = _plain_parts(encoder, layer, x, attentions[layer])
            n = len(parts)
            h = [torch.nn.functional.layer_norm(y[i], y[i].shape, ln1.weight, ln1.bias, ln1.eps) for i in range(n)]
            n_enc, c = [], []
            for i in range(n):
                shares = [_share(parts[i][j], ln1, y[i]) for j in range(n)]
                n_enc.append([float(_share(share, ln2, y2[i]).norm()) for share in shares])
                row = [max(0.0, float(h[i].abs().sum() - (h[i] - share).abs().sum())) for share in shares]
                c.append([value / sum(row) for value in row])
            rolled_n = n_enc if rolled_n is None else _matmul(n_enc, rolled_n)
            rolled_c = c if rolled_c is None else _matmul(c, rolled_c)
            globenc.append(_row_normalized(rolled_n))
            alti.append(torch.tensor(rolled_c))
            own_n.append(_row_normalized(n_enc))
            own_c.append(torch.tensor(c))
    found = {"globenc": globenc, "alti": alti, "globenc own": own_n, "alti own": own_c}
    return {name: torch.stack(maps) for name, maps in found.items()}


def _plain_value_zeroing(encoder: LoadedEncoder, inputs: dict) -> torch.Tensor:
    """Mohebbi et al.'s value zeroing of one example, one forward per (layer, token): that layer's value
    vector of the token set to 0 in every head, the layer's output compared with the original by cosine
    distance, rows normalized. (L, n, n)."""
    layout = attention_layout(encoder.model)
    blocks = attention_blocks(encoder.model)
    value_modules = {id(block.get_submodule(layout.value)): block.get_submodule(layout.value) for block in blocks}
    with torch.inference_mode():
        original = encoder.model(**inputs, output_hidden_states=True).hidden_states
    n = original[0].shape[1]
    scores = torch.zeros(len(blocks), n, n, dtype=torch.float64)
    for layer in range(len(blocks)):
        for token in range(n):
            calls = []

            def zero(_module, _args, output, layer=layer, token=token, calls=calls):
                calls.append(None)
                if len(calls) - 1 == layer:
                    output = output.clone()
                    output[:, token] = 0
                return output

            handles = [module.register_forward_hook(zero) for module in value_modules.values()]
            with torch.inference_mode():
                zeroed = encoder.model(**inputs, output_hidden_states=True).hidden_states[layer + 1][0]
            for handle in handles:
                handle.remove()
            for i in range(n):
                scores[layer, i, token] = 1 - torch.nn.functional.cosine_similarity(
                    zeroed[i].double(), original[layer + 1][0, i].double(), dim=0
                )
    return (scores / scores.sum(-1, keepdim=True)).float()


def test_layer_decompositions_follow_each_papers_formula(family_encoder: LoadedEncoder) -> None:
    _, maps = _decomposed(family_encoder, TEXTS[:1])
    inputs = _inputs(family_encoder, TEXTS[:1])
    for name, expected in _plain_globenc_and_alti(family_encoder, inputs).items():
        torch.testing.assert_close(maps[name][0, :, 0], expected, rtol=1e-4, atol=1e-5, msg=name)
    torch.testing.assert_close(
        maps["value_zeroing"][0, :, 0], _plain_value_zeroing(family_encoder, inputs), rtol=1e-4, atol=1e-5
    )
    for name in LAYER_DECOMPOSITIONS:
        torch.testing.assert_close(maps[name].sum(-1), torch.ones(maps[name].shape[:-1]))


def test_padding_changes_no_decomposition(family_encoder: LoadedEncoder) -> None:
    inputs, batched = _decomposed(family_encoder, TEXTS)
    valid = inputs["attention_mask"].bool()
    for example, text in enumerate(TEXTS):
        _, alone = _decomposed(family_encoder, (text,))
        n = alone["globenc"].shape[-1]
        keep = valid[example].nonzero().squeeze(1)  # left-padding families keep their tokens at the end
        for name in (*LAYER_DECOMPOSITIONS, "globenc own", "alti own"):
            crop = batched[name][example][..., keep[:, None], keep]
            torch.testing.assert_close(crop, alone[name][0], rtol=1e-4, atol=1e-5, msg=name)
            assert int(valid[example].sum()) == n
            padded = ~valid[example]
            assert not batched[name][example][..., padded, :].any() and not batched[name][example][..., padded].any()


def test_a_family_without_named_layer_norms_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    encoder = load_encoder(str(tiny_family("bert", tmp_path)))
    layouts = dict(attention_layouts.ATTENTION_LAYOUTS)
    layouts["bert"] = dataclasses.replace(layouts["bert"], residual_norm=None)
    monkeypatch.setattr(attention_layouts, "ATTENTION_LAYOUTS", layouts)
    with pytest.raises(ValueError, match=r"family 'bert' \(BertModel\) names no such LayerNorms"):
        encoder_layer_parts(encoder.model, encoder.spec.n_heads)
    with pytest.raises(ValueError, match="post-LN encoder layer"), captured_layers(encoder.model, with_norms=True):
        pass
