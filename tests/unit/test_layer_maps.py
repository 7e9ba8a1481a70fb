"""Layer by layer: the maps the forward hooks hand on (compute/layer_maps.py) are the model's own, in every
family, and the attention pass that takes its statistics from them holds one layer's maps at a time."""

from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest
import torch
from torch.multiprocessing.reductions import StorageWeakRef
from torch.overrides import TorchFunctionMode
from transformers import BertModel

from dagster_project.compute.attention_pass import extract_attention_facts
from dagster_project.compute.devices import float32_maps
from dagster_project.compute.fact_kinds import FACT_KINDS
from dagster_project.compute.layer_maps import finished_layers
from dagster_project.compute.models import LoadedEncoder, load_encoder
from dagster_project.compute.weightings import WEIGHTINGS
from tests.tiny_models import FAMILIES, bert_tokenizer, save_model, tiny_config, tiny_family

TEXTS = ("the cat sat on the mat.", "a dog slept well, and the quick brown fox was not home")
# every kind that keeps nothing of a layer's maps past the layer (head distances keep each layer's real query
# rows, (rows, L*H, T): shaped like maps here, where L*H = T = 32, so MapBytes would count them)
PER_LAYER = ("head_summaries", "position_histograms", "received_attention", "pattern_example_maps", "head_example_maps")
PER_LAYER_KINDS = [FACT_KINDS[name] for name in PER_LAYER]


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_each_layer_hands_on_the_models_own_maps(family: str, tmp_path: Path) -> None:
    encoder = load_encoder(str(tiny_family(family, tmp_path)))
    inputs = dict(encoder.tokenizer(list(TEXTS), return_tensors="pt", padding=True))
    if not encoder.spec.takes_token_types:
        inputs.pop("token_type_ids", None)
    handed: list[tuple[int, torch.Tensor]] = []
    with torch.inference_mode():
        expected = encoder.model(**inputs, output_attentions=True).attentions
        with finished_layers(encoder.model, lambda layer, maps: handed.append((layer, maps))) as options:
            for _ in range(2):  # the layer numbers start again with every forward
                output = encoder.model(**inputs, **options)
    assert [layer for layer, _ in handed] == [*range(len(expected))] * 2
    for layer, maps in handed:
        assert torch.equal(maps, expected[layer]), (family, layer)
    # the model itself keeps none of them (MPNet's and DeBERTa's encoders collect None)
    assert output.attentions is None or all(maps is None for maps in output.attentions)


class MapBytes(TorchFunctionMode):
    """The peak bytes of live attention-map-shaped tensors, (..., width, width), made by torch calls while
    it is on (a storage counts once, however many views of it there are)."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.width = width
        self.live: dict[int, tuple[StorageWeakRef, int]] = {}
        self.peak = 0

    def __torch_function__(self, func: Callable, types: tuple, args: tuple = (), kwargs: dict | None = None):
        result = func(*args, **(kwargs or {}))
        for value in result if isinstance(result, tuple | list) else (result,):
            if isinstance(value, torch.Tensor) and value.dim() >= 2 and value.shape[-2:] == (self.width, self.width):
                storage = value.untyped_storage()
                self.live.setdefault(storage._cdata, (StorageWeakRef(storage), storage.nbytes()))
        self.live = {key: entry for key, entry in self.live.items() if not entry[0].expired()}
        self.peak = max(self.peak, sum(nbytes for _, nbytes in self.live.values()))
        return result


def _tiny_bert(folder: Path, n_layers: int) -> LoadedEncoder:
    """The unit tests' tiny BERT (4 heads, width 32) with `n_layers` layers."""
    tokenizer = bert_tokenizer()
    config = tiny_config(tokenizer.vocab_size)
    config.num_hidden_layers = n_layers
    torch.manual_seed(0)
    return load_encoder(str(save_model(folder, BertModel(config), tokenizer)))


def _all_maps_at_once(encoder: LoadedEncoder, tokens: pl.DataFrame, width: int) -> int:
    """MapBytes' peak of a forward that returns every layer's maps, stacked as a whole-batch pass would."""
    batch = tokens.filter(pl.col("example_id") == tokens["example_id"].min()).sort("position")
    ids = torch.tensor(batch["token_id"].to_list() + [0] * (width - batch.height))[None]
    with torch.inference_mode(), MapBytes(width) as meter:
        float32_maps(encoder.model(input_ids=ids, output_attentions=True).attentions)
    return meter.peak


def test_the_pass_holds_one_layers_maps_whatever_the_depth(tmp_path: Path, demo_tokens: pl.DataFrame) -> None:
    width = int(demo_tokens.group_by("example_id").len()["len"].max())
    n_examples = demo_tokens["example_id"].n_unique()
    one_layer = n_examples * 4 * width * width * 4  # (B, H, T, T) float32: all 12 examples make one batch
    peaks, whole = {}, {}
    for n_layers in (2, 8):
        encoder = _tiny_bert(tmp_path / f"layers-{n_layers}", n_layers)
        with MapBytes(width) as meter:
            facts = extract_attention_facts(encoder, demo_tokens, PER_LAYER_KINDS, weightings=WEIGHTINGS)
        assert facts.n_examples == n_examples
        assert set(facts.tables["head_summaries"]["layer"]) == set(range(1, n_layers + 1))
        peaks[n_layers] = meter.peak
        whole[n_layers] = _all_maps_at_once(encoder, demo_tokens, width)
    # the meter sees maps pile up: one example's maps of every layer grow with the depth
    assert whole[8] >= 3.5 * whole[2], whole
    # the pass: at least one layer's maps of the batch, and no more for 8 layers than for 2
    assert peaks[2] >= one_layer, (peaks, one_layer)
    assert peaks[8] <= 1.1 * peaks[2], peaks
