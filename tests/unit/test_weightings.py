"""Norm-based and rollout weightings (compute/weightings.py, docs/methods.md §3.9) on tiny random models,
against direct computations from the models' weights and a plain loop of Abnar and Zuidema's formula."""

from pathlib import Path

import polars as pl
import pytest
import torch

from dagster_project.compute.attention_pass import extract_attention_facts
from dagster_project.compute.fact_kinds import FACT_KINDS
from dagster_project.compute.metrics import TokenMasks
from dagster_project.compute.models import LoadedEncoder, load_encoder
from dagster_project.compute.weightings import (
    LAYER_WEIGHTINGS,
    WEIGHTINGS,
    WeightedMaps,
    aggregated_maps,
    captured_layers,
    check_weightings,
    norm_maps,
    output_grams,
    rollout_maps,
    value_norm_columns,
    value_norms,
    weighted_maps,
)
from tests.tiny_models import tiny_family

TEXTS = ("the cat sat on the mat.", "a dog slept well, and the quick brown fox was not home")


@pytest.fixture(scope="module", params=["bert", "roberta", "distilbert"])
def family_encoder(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> LoadedEncoder:
    """A tiny random model of the family (DistilBERT's attention is q_lin/k_lin/v_lin/out_lin)."""
    return load_encoder(str(tiny_family(request.param, tmp_path_factory.mktemp(request.param))))


def _forward(encoder: LoadedEncoder, texts: tuple[str, ...]) -> tuple[dict, torch.Tensor, list, tuple]:
    """Inputs, (B, L, H, T, T) maps, the captured value outputs (B, L, T, H * dh) and the hidden states of a
    padded batch."""
    inputs = dict(encoder.tokenizer(list(texts), return_tensors="pt", padding=True))
    inputs.pop("token_type_ids", None)
    with torch.inference_mode(), captured_layers(encoder.model) as captured:
        output = encoder.model(**inputs, output_attentions=True, output_hidden_states=True)
    return inputs, torch.stack(output.attentions, dim=1), captured.take().values, output.hidden_states


def _direct_norms(encoder: LoadedEncoder, hidden_states: tuple) -> torch.Tensor:
    """||(x W_V^h + b_V^h) W_O^h|| from each layer's input and its value and output Linear weights, head by head."""
    model = encoder.model
    blocks = (
        [layer.attention for layer in model.transformer.layer]
        if model.config.model_type == "distilbert"
        else [layer.attention for layer in model.encoder.layer]
    )
    n_heads = encoder.spec.n_heads
    per_layer = []
    for layer, block in enumerate(blocks):
        value, output = (
            (block.v_lin, block.out_lin)
            if model.config.model_type == "distilbert"
            else (block.self.value, block.output.dense)
        )
        x = hidden_states[layer]
        v = x @ value.weight.T + value.bias  # (B, T, H * dh)
        d_head = v.shape[-1] // n_heads
        heads = []
        for head in range(n_heads):
            part = slice(head * d_head, (head + 1) * d_head)
            heads.append((v[..., part] @ output.weight[:, part].T).norm(dim=-1))  # (B, T)
        per_layer.append(torch.stack(heads, dim=1))
    return torch.stack(per_layer, dim=1)  # (B, L, H, T)


def test_value_norms_and_norm_maps_match_a_direct_computation(family_encoder: LoadedEncoder) -> None:
    inputs, attn, values, hidden = _forward(family_encoder, TEXTS)
    norms = value_norms(values, output_grams(family_encoder.model, family_encoder.spec.n_heads))
    with torch.inference_mode():
        direct = _direct_norms(family_encoder, hidden)
    assert norms.shape == attn.shape[:4]
    torch.testing.assert_close(norms, direct, rtol=1e-4, atol=1e-5)
    maps = norm_maps(attn, norms)
    valid = inputs["attention_mask"].bool()
    expected = attn * direct[..., None, :]
    expected = expected / expected.sum(-1, keepdim=True)
    real = valid[:, None, None, :, None].expand_as(maps)
    torch.testing.assert_close(maps[real], expected[real], rtol=1e-4, atol=1e-6)
    row_sums = maps.sum(-1)[valid[:, None, None, :].expand(maps.shape[:4])]
    torch.testing.assert_close(row_sums, torch.ones_like(row_sums))
    assert (maps * ~valid[:, None, None, None, :]).abs().max() == 0  # padded keys get nothing


def _plain_rollout(attn: torch.Tensor) -> torch.Tensor:
    """Abnar and Zuidema's rollout of one example's (L, H, n, n) maps, entry by entry."""
    n_layers, _, n, _ = attn.shape
    rolled = None
    for layer in range(n_layers):
        mixed = [
            [0.5 * float(attn[layer, :, i, j].mean()) + (0.5 if i == j else 0.0) for j in range(n)] for i in range(n)
        ]
        mixed = [[value / sum(row) for value in row] for row in mixed]
        if rolled is None:
            rolled = mixed
        else:
            rolled = [[sum(mixed[i][k] * rolled[k][j] for k in range(n)) for j in range(n)] for i in range(n)]
        yield torch.tensor(rolled)


def test_rollout_rows_sum_to_one_and_follow_the_formula(family_encoder: LoadedEncoder) -> None:
    inputs, attn, _, _ = _forward(family_encoder, TEXTS)
    valid = inputs["attention_mask"].bool()
    rolled = rollout_maps(attn, valid)
    assert rolled.shape == (len(TEXTS), attn.shape[1], 1, attn.shape[-1], attn.shape[-1])
    for example in range(len(TEXTS)):
        n = int(valid[example].sum())
        crop = rolled[example, :, 0, :n, :n]
        torch.testing.assert_close(crop.sum(-1), torch.ones(attn.shape[1], n))
        assert not rolled[example, :, 0, n:].any() and not rolled[example, :, 0, :, n:].any()
        expected = torch.stack(list(_plain_rollout(attn[example, :, :, :n, :n])))
        torch.testing.assert_close(crop, expected, rtol=1e-4, atol=1e-6)


def test_aggregated_maps_read_each_weighting_per_layer_and_rolled_out_by_hand() -> None:
    """3 tokens, 2 layers of 2 heads. Layer 1: identity and a shift (i -> i + 1), mean A1 = [[.5, .5, 0],
    [0, .5, .5], [.5, 0, .5]]; layer 2: every row to token 3 and every row to token 1, mean A2 = [.5, 0, .5]
    in each row. Rolled out: A2 A1 = [.5, .25, .25] in each row. Rollout's own maps are 0.5 A + 0.5 I:
    R1 = [[.75, .25, 0], [0, .75, .25], [.25, 0, .75]], R2 = [[.75, 0, .25], [.25, .5, .25], [.25, 0, .75]];
    R2 R1 = [[.625, .1875, .1875], [.25, .4375, .3125], [.375, .0625, .5625]]."""
    eye, shift = torch.eye(3), torch.eye(3).roll(1, dims=1)
    to_last, to_first = torch.zeros(3, 3), torch.zeros(3, 3)
    to_last[:, 2], to_first[:, 0] = 1, 1
    attn = torch.stack([torch.stack([eye, shift]), torch.stack([to_last, to_first])])[None]  # (1, L=2, H=2, 3, 3)
    weighted = weighted_maps(attn, ("attention", "rollout"), torch.ones(1, 3, dtype=torch.bool), None, None)
    # value zeroing rolls out by the plain product too: given A1 and A2 as its maps, A2 A1 again
    weighted = WeightedMaps(
        {**weighted.maps, "value_zeroing": attn.mean(2, keepdim=True)}, layer_maps=weighted.layer_maps
    )
    found = aggregated_maps(weighted)[0]  # (A=2, W=3, L=2, 3, 3)
    a1 = torch.tensor([[0.5, 0.5, 0], [0, 0.5, 0.5], [0.5, 0, 0.5]])
    a2 = torch.tensor([[0.5, 0, 0.5]] * 3)
    r1 = torch.tensor([[0.75, 0.25, 0], [0, 0.75, 0.25], [0.25, 0, 0.75]])
    r2 = torch.tensor([[0.75, 0, 0.25], [0.25, 0.5, 0.25], [0.25, 0, 0.75]])
    rolled_attention = torch.tensor([[0.5, 0.25, 0.25]] * 3)
    rolled_rollout = torch.tensor([[0.625, 0.1875, 0.1875], [0.25, 0.4375, 0.3125], [0.375, 0.0625, 0.5625]])
    for w in (0, 2):  # attention, value zeroing
        torch.testing.assert_close(found[0, w], torch.stack([a1, a2]))  # per_layer
        torch.testing.assert_close(found[1, w], torch.stack([a1, rolled_attention]))  # rolled_out
    torch.testing.assert_close(found[0, 1], torch.stack([r1, r2]))
    torch.testing.assert_close(found[1, 1], torch.stack([r1, rolled_rollout]))
    torch.testing.assert_close(found[1, 1], rollout_maps(attn, torch.ones(1, 3, dtype=torch.bool))[0, :, 0])


def test_padding_changes_nothing(family_encoder: LoadedEncoder) -> None:
    """A padded batch gives each example the rows it gets alone."""
    inputs, attn, values, _ = _forward(family_encoder, TEXTS)
    grams = output_grams(family_encoder.model, family_encoder.spec.n_heads)
    valid = inputs["attention_mask"].bool()
    norm, rolled = norm_maps(attn, value_norms(values, grams)), rollout_maps(attn, valid)
    for example, text in enumerate(TEXTS):
        alone_inputs, alone_attn, alone_values, _ = _forward(family_encoder, (text,))
        n = alone_attn.shape[-1]
        alone_norm = norm_maps(alone_attn, value_norms(alone_values, grams))
        alone_rolled = rollout_maps(alone_attn, alone_inputs["attention_mask"].bool())
        torch.testing.assert_close(norm[example, ..., :n, :n], alone_norm[0], rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(rolled[example, ..., :n, :n], alone_rolled[0], rtol=1e-4, atol=1e-5)


def test_weightings_are_checked_and_ordered() -> None:
    assert check_weightings(["rollout", "norm"]) == ("attention", "norm", "rollout")
    assert check_weightings(list(reversed(WEIGHTINGS))) == WEIGHTINGS
    assert check_weightings([]) == ("attention",)
    with pytest.raises(
        ValueError, match=r"unknown weightings \['value'\]; known: \['attention', 'norm', 'rollout', 'globenc', 'alti',"
    ):
        check_weightings(["value"])


KINDS = [FACT_KINDS[name] for name in ("head_summaries", "position_histograms", "head_distances")]


def test_a_pass_with_every_weighting_keeps_the_attention_rows(
    encoder: LoadedEncoder, demo_tokens: pl.DataFrame
) -> None:
    alone = extract_attention_facts(encoder, demo_tokens, KINDS)
    weighted = extract_attention_facts(encoder, demo_tokens, KINDS, weightings=WEIGHTINGS)
    assert set(alone.tables) == {"head_summaries", "position_histograms", "head_distances"}
    assert set(weighted.tables) == set(alone.tables) | {"value_norms"}
    for table in ("head_summaries", "position_histograms"):
        rows = weighted.tables[table]
        assert rows.filter(pl.col("weighting") == "attention").equals(alone.tables[table]), table
        assert set(rows["weighting"]) == set(WEIGHTINGS)
        for weighting in LAYER_WEIGHTINGS:
            per_layer = rows.filter(pl.col("weighting") == weighting)
            assert set(per_layer["head"]) == {0} and set(per_layer["layer"]) == {1, 2}, (table, weighting)
    assert weighted.tables["head_distances"].equals(alone.tables["head_distances"])
    summaries = weighted.tables["head_summaries"]
    assert summaries.group_by("weighting").len().sort("weighting").rows() == [
        ("alti", 12 * 2),
        ("attention", 12 * 2 * 4),
        ("globenc", 12 * 2),
        ("norm", 12 * 2 * 4),
        ("rollout", 12 * 2),
        ("value_zeroing", 12 * 2),
    ]
    assert float(summaries["row_sum_error"].max()) < 1e-4
    norms = weighted.tables["value_norms"]
    assert set(norms["token_class"]) == {"cls", "sep", "punct", "content"}
    # every example's tokens fall in one class each, in every (layer, head)
    per_head = norms.group_by("example_id", "layer", "head").agg(pl.col("n_tokens").sum())
    lengths = summaries.filter(pl.col("weighting") == "attention").select("example_id", "n_tokens").unique()
    assert per_head.join(lengths, on="example_id").filter(pl.col("n_tokens") != pl.col("n_tokens_right")).is_empty()
    assert per_head.height == 12 * 2 * 4 and (norms["mean_norm"] > 0).all()


def test_norm_weighting_moves_mass_from_tokens_with_small_value_norms(tmp_path: Path) -> None:
    """A head whose [SEP] value vector is zeroed gives [SEP] no norm-weighted mass, whatever its attention."""
    encoder = load_encoder(str(tiny_family("bert", tmp_path)))
    inputs, attn, values, _ = _forward(encoder, TEXTS[:1])
    sep = inputs["input_ids"][0] == encoder.tokenizer.sep_token_id
    values = values.clone()
    values[0, 0, sep] = 0
    norm = norm_maps(attn, value_norms(values, output_grams(encoder.model, encoder.spec.n_heads)))
    assert attn[0, 0][..., sep].sum() > 0
    assert norm[0, 0][..., sep].abs().max() == 0


def test_value_norm_columns_keep_cls_and_sep_apart() -> None:
    """[CLS] a . b [SEP] (and a padded position): one row per class with tokens, their mean norm."""
    positions = torch.tensor([[True, False, False, False, False, False]])
    masks = TokenMasks(
        valid=torch.tensor([[True, True, True, True, True, False]]),
        cls=positions,
        sep=positions.roll(4, dims=1),
        punct=positions.roll(2, dims=1),
    )
    norms = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 9.0]).reshape(1, 1, 1, 6)
    columns = value_norm_columns(norms, masks, torch.tensor([7]))
    rows = {
        cls: (float(norm), int(n))
        for cls, norm, n in zip(*(columns[k] for k in ("token_class", "mean_norm", "n_tokens")))
    }
    assert rows == {"cls": (1.0, 1), "sep": (5.0, 1), "punct": (3.0, 1), "content": (3.0, 2)}
    assert set(columns["example_id"]) == {7} and set(columns["layer"]) == {1} and set(columns["head"]) == {1}
