"""A bfloat16 forward on the CPU: head summaries within the documented tolerance of float32
(docs/operations/devices.md), statistics in float32, and the gradient passes refusing low precision.

Measured max |bf16 - float32| (demo corpus, 24 examples): the tiny random BERT 1.8e-4 on the
masses and 1.5e-5 nats on the entropies; MiniLM 6.4e-3 on the masses, 2.5e-2 nats on the
entropies (wiki_segments, 200 examples: 7.9e-3 and 5.2e-2), Kovaleva pattern classes 0.2-0.3 %
flipped. Tolerances: masses 0.02, entropies 0.1 nats.
"""

from pathlib import Path

import polars as pl
import pytest
import torch

from dagster_project.compute.attention_pass import extract_attention_facts
from dagster_project.compute.devices import ComputeDevice
from dagster_project.compute.kovaleva.finetuning import Recipe, fine_tune, load_classifier
from dagster_project.compute.kovaleva.task_data import TaskData
from dagster_project.compute.models import DEFAULT_MODEL, load_encoder
from dagster_project.compute.pascual.hta import HtaMethod
from dagster_project.compute.pascual.hta_facts import extract_hta_facts
from dagster_project.corpora import encode_corpus, read_demo_pairs

BF16 = ComputeDevice(torch.device("cpu"), torch.bfloat16)
MASSES = ("to_cls", "to_sep", "to_punct", "to_self", "to_prev", "to_next", "sep_to_sep")
ENTROPIES = ("entropy", "cls_entropy")
MASS_TOLERANCE, ENTROPY_TOLERANCE = 0.02, 0.1  # docs/operations/devices.md


def deviations(source: str) -> tuple[dict[str, float], pl.DataFrame]:
    """Max |bf16 - float32| per head-summary column over the demo corpus, and the bf16 rows."""
    keys = ["example_id", "layer", "head"]
    full = load_encoder(source)
    tokens = encode_corpus(read_demo_pairs(), full.tokenizer, 128, None, 0).tokens
    reference = extract_attention_facts(full, tokens).tables["head_summaries"].sort(keys)
    low_encoder = load_encoder(source, BF16)
    assert next(low_encoder.model.parameters()).dtype == torch.bfloat16
    low = extract_attention_facts(low_encoder, tokens).tables["head_summaries"].sort(keys)
    assert low.select(keys).equals(reference.select(keys))
    return {column: float((low[column] - reference[column]).abs().max()) for column in MASSES + ENTROPIES}, low


@pytest.mark.parametrize("model", ["tiny", "minilm"])
def test_bf16_head_summaries_within_tolerance_of_float32(model: str, tiny_model_dir: Path):
    deviation, low = deviations(str(tiny_model_dir) if model == "tiny" else DEFAULT_MODEL)
    assert max(deviation[column] for column in MASSES) <= MASS_TOLERANCE, deviation
    assert max(deviation[column] for column in ENTROPIES) <= ENTROPY_TOLERANCE, deviation
    assert max(deviation.values()) > 0  # the forward did run in bfloat16
    # Statistics in float32 on renormalized rows: rows sum to 1 as closely as a float32 forward's
    # (bfloat16 probabilities alone are off by ~1e-3, which the rows_sum_to_one check would fail).
    assert float(low["row_sum_error"].max()) <= 1e-6


def test_hta_refuses_a_low_precision_encoder(tiny_model_dir: Path, demo_tokens):
    encoder = load_encoder(str(tiny_model_dir), BF16)
    with pytest.raises(
        ValueError, match=r"HTA takes derivatives, so it needs the encoder in float32, not cpu bfloat16"
    ):
        extract_hta_facts(encoder, demo_tokens, HtaMethod.parse("estimate(2)"))


def test_fine_tuning_refuses_a_low_precision_model(tiny_classifier_dir: Path):
    model = load_classifier(str(tiny_classifier_dir), BF16)
    data = TaskData([0], [torch.tensor([101, 102])], [torch.tensor([0, 0])], torch.tensor([1.0]))
    with pytest.raises(
        ValueError, match=r"fine-tuning takes gradients and runs in float32; the model is in torch.bfloat16"
    ):
        fine_tune(model, data, Recipe(max_steps=1), 0, True)
