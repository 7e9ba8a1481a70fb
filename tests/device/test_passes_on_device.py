"""Every pass on each device this machine has, against the same pass on the CPU.

`cuda` (and `mps`) run where torch finds the device and skip, saying why, elsewhere; `cpu` runs
everywhere. Each case checks that the pass's outputs are where they belong (the model and the
tensors it returns on the device, rows and logits back on the CPU) and that its results match the
CPU's.

Placement on the CPU as well: a tensor that the project's code creates without naming a device
lands on the default device, the CPU, whatever device the pass runs on, and mixing it with the
batch fails only on a GPU. `placement_checked` runs each pass under a TorchFunctionMode (public
torch API) that records every tensor factory called from the project's code (dagster_project)
without a `device`; the pass fails naming the file and line. Factories called inside torch or
transformers are theirs to place (e.g. an optimizer's step counters, deliberately on the CPU);
a `with torch.device(...)` block names the device for the factories in it. Unlike a `meta` default
device, the check changes no tensor, so it holds whatever torch creates where.

Results: floats within TOLERANCE. Two comparisons rank values, and ranks of nearly equal values
can swap between devices (the tiny random model's attention is nearly uniform: hundreds of its
values lie within 1e-5 of another in the same row), so those compare tie-tolerantly: HTA's
Spearman within the most that swapping values closer than RANK_NOISE can move it
(`spearman_slack`), and the probes' predicted heads on the words whose CPU scores pick a head by
at least CLEAR_MARGIN (every word's scores are compared as floats, so ties cannot hide a miss).
"""

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pytest
import torch
from torch.overrides import TorchFunctionMode

from dagster_project.compute.attention_facts import feature_pair_links, relation_hit_rows
from dagster_project.compute.attention_pass import extract_attention_facts, pass_inputs
from dagster_project.compute.batching import head_columns, histogram_rows, length_batches
from dagster_project.compute.clark.gradients import extract_grad_importance, load_loss_model
from dagster_project.compute.clark.head_clustering import distance_matrix, embed_heads
from dagster_project.compute.clark.probe_inputs import probe_batches
from dagster_project.compute.clark.probes import (
    distance_probe_for,
    predict_heads,
    probe_for,
    random_init_encoder,
    train_probe,
)
from dagster_project.compute.devices import CPU, ComputeDevice, resolve
from dagster_project.compute.fact_kinds import FACT_KINDS
from dagster_project.compute.kovaleva.ablation import ablation_settings, settings_logits, use_ablation_attention
from dagster_project.compute.kovaleva.finetune_similarity import extract_finetune_cosines
from dagster_project.compute.kovaleva.finetuning import (
    Recipe,
    build_classifier,
    fine_tune,
    load_classifier,
    predict_logits,
)
from dagster_project.compute.kovaleva.task_data import TaskData, length_sorted_batches, pad_inputs
from dagster_project.compute.models import LoadedEncoder, load_encoder
from dagster_project.compute.pascual.hta import HtaMethod
from dagster_project.compute.pascual.hta_facts import (
    CONTRIBUTION_KINDS,
    estimate_check_error,
    example_maps,
    extract_hta_facts,
)
from dagster_project.corpora import encode_corpus, read_demo_pairs
from tests.tiny_models import TINY_HEADS, TINY_LAYERS

NO_CUDA = "torch.cuda.is_available() is False: no CUDA device (or no CUDA build of torch) on this machine"
NO_MPS = "torch.backends.mps.is_available() is False: no Apple MPS device on this machine"
DEVICES = [
    pytest.param("cpu", id="cpu"),
    pytest.param("cuda", id="cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason=NO_CUDA)),
    pytest.param("mps", id="mps", marks=pytest.mark.skipif(not torch.backends.mps.is_available(), reason=NO_MPS)),
]
# Device kernels (TF32 off: torch's default for float32 matmuls) differ from the CPU's in the last bits.
TOLERANCE = 1e-4
# Values closer than this may rank either way on another device: the float32 maps of the tiny model
# are within 2e-8 of float64 ones on the CPU.
RANK_NOISE = 1e-6
# A probe's prediction counts as the CPU's choice where its top score leads the next by this much;
# the tiny model's nearly uniform attention leaves some words' scores within 2e-6 of each other.
CLEAR_MARGIN = 1e-4


@pytest.fixture(params=DEVICES)
def compute(request: pytest.FixtureRequest) -> ComputeDevice:
    return resolve(request.param, "float32")


# Tensor factories that place their tensor on the default device unless given one; torch.tensor and
# torch.as_tensor of a tensor keep its device.
FACTORIES = frozenset(
    {
        torch.arange,
        torch.as_tensor,
        torch.empty,
        torch.empty_strided,
        torch.eye,
        torch.full,
        torch.linspace,
        torch.logspace,
        torch.ones,
        torch.rand,
        torch.randint,
        torch.randn,
        torch.randperm,
        torch.scalar_tensor,
        torch.tensor,
        torch.tril_indices,
        torch.triu_indices,
        torch.zeros,
    }
)
COPIES = frozenset({torch.tensor, torch.as_tensor})


class DevicelessFactories(TorchFunctionMode):
    """Records `module:line` of every tensor factory that the project's code calls without a device."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        copies_a_tensor = func in COPIES and bool(args) and isinstance(args[0], torch.Tensor)
        if func in FACTORIES and kwargs.get("device") is None and not copies_a_tensor:
            caller = _first_caller_outside_torch()
            if caller is not None:
                self.calls.append(caller)
        return func(*args, **kwargs)


def _first_caller_outside_torch() -> str | None:
    """`module:line` of the nearest frame outside torch and this file when it is the project's code."""
    frame = sys._getframe(1)
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if module != __name__ and module.split(".")[0] != "torch":
            return f"{module}:{frame.f_lineno}" if module.split(".")[0] == "dagster_project" else None
        frame = frame.f_back
    return None


@contextmanager
def placement_checked() -> Iterator[None]:
    """The context a pass runs in: fails after it if the project's code created a tensor without a device."""
    mode = DevicelessFactories()
    with mode:
        yield
    assert not mode.calls, (
        f"tensors created without a device (on the CPU whatever the pass's device): {sorted(set(mode.calls))}"
    )


def assert_same_rows(reference: pl.DataFrame, placed: pl.DataFrame, keys: list[str]) -> None:
    """Same rows; float columns within TOLERANCE (NaN where the reference has NaN)."""
    assert reference.height == placed.height > 0
    reference, placed = reference.sort(keys), placed.sort(keys)
    for column in reference.columns:
        expected, got = reference[column], placed[column]
        if expected.dtype.is_float():
            assert expected.is_nan().equals(got.is_nan()), column
            assert float((expected - got).abs().fill_nan(0).max()) <= TOLERANCE, column
        else:
            assert expected.equals(got), column


@pytest.fixture(scope="module")
def words(encoder: LoadedEncoder) -> pl.DataFrame:
    """Demo words with made-up spaCy flags: every third word a verb, words 1 and 4 the subjects of 3 and 6."""
    index = pl.col("word_index")
    return encode_corpus(read_demo_pairs(), encoder.tokenizer, 128, 12, 0).words.with_columns(
        is_noun=index % 3 != 0,
        is_verb=index % 3 == 0,
        is_pronoun=index == 2,
        is_subject=index.is_in([1, 4]),
        is_object=pl.lit(False),
        is_negation=pl.lit(False),
        head_word_index=index.replace_strict({1: 3, 4: 6}, default=None, return_dtype=pl.Int32),
    )


FACT_TABLES = {
    "head_summaries": ["example_id", "layer", "head"],
    "position_histograms": ["example_id", "scope", "layer", "head", "offset"],
    "relation_hits": ["example_id", "word_index", "layer", "head"],
    "head_distances": ["layer_a", "head_a", "layer_b", "head_b"],
    "received_attention": ["example_id", "position", "layer", "head"],
    "frame_link_attention": ["example_id", "target_start", "element_start", "layer", "head"],
    "feature_pair_attention": ["example_id", "pair", "layer", "head"],
    "pattern_example_maps": ["pattern", "example_id", "layer", "head", "query", "key"],
}


def _facts(encoder: LoadedEncoder, tokens: pl.DataFrame, words: pl.DataFrame) -> dict[str, pl.DataFrame]:
    first = int(tokens["example_id"].min())
    links = pl.DataFrame(
        {"example_id": [first], "target_start": [0], "target_end": [1], "element_start": [2], "element_end": [4]}
    )
    inputs = pass_inputs(
        encoder, tokens, words, frame_links=links, feature_links=feature_pair_links(words), word_mode="max"
    )
    kinds = [FACT_KINDS[table] for table in FACT_TABLES]
    tables = extract_attention_facts(encoder, tokens, kinds, inputs, batch_tokens=256).tables
    # the dense grains unpacked, so their floats are compared within TOLERANCE row by row
    tables["position_histograms"] = histogram_rows(tables["position_histograms"], "attention")
    tables["relation_hits"] = relation_hit_rows(tables["relation_hits"])
    return tables


def test_attention_facts(compute, tiny_model_dir: Path, encoder, demo_tokens, words):
    reference = _facts(encoder, demo_tokens, words)
    placed = load_encoder(str(tiny_model_dir), compute)
    assert next(placed.model.parameters()).device.type == compute.device.type
    with placement_checked():
        tables = _facts(placed, demo_tokens, words)
    for table, keys in FACT_TABLES.items():
        assert_same_rows(reference[table], tables[table], keys)


def test_head_clustering(compute, tiny_model_dir: Path, encoder, demo_tokens, words):
    """Clark Fig. 6: the pass's Jensen-Shannon sums (on the device), then MDS (sklearn, CPU)."""
    pytest.importorskip("sklearn", reason="MDS needs scikit-learn (test_attention_facts compares the distances)")
    kinds = [FACT_KINDS["head_distances"]]
    reference = extract_attention_facts(encoder, demo_tokens, kinds).tables["head_distances"]
    placed = load_encoder(str(tiny_model_dir), compute)
    with placement_checked():
        rows = extract_attention_facts(placed, demo_tokens, kinds).tables["head_distances"]
    assert rows.height == TINY_LAYERS * TINY_HEADS * (TINY_LAYERS * TINY_HEADS - 1) // 2
    expected, got = embed_heads(distance_matrix(reference).js_mean), embed_heads(distance_matrix(rows).js_mean)
    assert abs(expected.stress - got.stress) <= TOLERANCE
    assert torch.allclose(torch.from_numpy(expected.xy), torch.from_numpy(got.xy), atol=1e-3)


def _rank_slack(values: torch.Tensor, ranks: torch.Tensor) -> torch.Tensor:
    """How far each value's rank (0..n-1 along the last axis) can move when values within RANK_NOISE
    of each other may come in either order."""
    n = values.shape[-1]
    differences = values[..., None, :] - values[..., :, None]  # [..., i, j] = v_j - v_i
    lowest = (differences < -RANK_NOISE).sum(-1)
    highest = n - 1 - (differences > RANK_NOISE).sum(-1)
    return torch.maximum(ranks - lowest, highest - ranks)


def rank_spearman_slack(attention: torch.Tensor, contributions: torch.Tensor) -> torch.Tensor:
    """(L, H) bound on how far row_correlations' Spearman of (L, H, n, n) maps can move on another
    device. Per row it is the Pearson correlation of argsort ranks, permutations of 0..n-1, so
    1 - 6 sum(d_i^2) / (n (n^2 - 1)) with d_i the rank difference of key i; each d_i can move by
    at most the two ranks' slacks s_i, so sum(d_i^2) by at most sum(2 |d_i| s_i + s_i^2)."""
    n = attention.shape[-1]
    ranks = [values.argsort(-1).argsort(-1) for values in (attention, contributions)]
    distance = (ranks[0] - ranks[1]).abs().double()
    slack = (_rank_slack(attention, ranks[0]) + _rank_slack(contributions, ranks[1])).double()
    per_row = 6 * (2 * distance * slack + slack**2).sum(-1) / (n * (n * n - 1))
    return per_row.clamp(max=2.0).mean(-1)


def spearman_slack(encoder: LoadedEncoder, tokens: pl.DataFrame, method: HtaMethod) -> pl.DataFrame:
    """rank_spearman_slack of every (example, layer, head, kind) row of extract_hta_facts(encoder,
    tokens, method).correlations, from the same maps (one example at a time, probes seeded alike)."""
    parts = []
    for batch in length_batches(tokens, encoder.tokenizer.pad_token_id or 0, 1, encoder.spec.takes_token_types):
        batch = batch.to(encoder.compute.device)
        maps = example_maps(encoder, batch.inputs, method, int(batch.example_ids[0]))
        for kind in CONTRIBUTION_KINDS:
            slack = rank_spearman_slack(maps.attention, getattr(maps, kind))
            parts.append(
                pl.DataFrame(head_columns({"slack": slack[None]}, batch.example_ids)).with_columns(kind=pl.lit(kind))
            )
    return pl.concat(parts)


def test_hta(compute, tiny_model_dir: Path, encoder, demo_tokens):
    tokens = demo_tokens.filter(pl.col("example_id").is_in(demo_tokens["example_id"].unique().sort()[:2].implode()))
    method = HtaMethod.parse("estimate(2)")
    reference = extract_hta_facts(encoder, tokens, method)
    reference_check = estimate_check_error(encoder, demo_tokens, method, 3).error
    placed = load_encoder(str(tiny_model_dir), compute)
    with placement_checked():
        facts = extract_hta_facts(placed, tokens, method)
        check = estimate_check_error(placed, demo_tokens, method, 3).error
    assert check.layer_pearson == pytest.approx(reference_check.layer_pearson, abs=TOLERANCE)
    assert check.mean_abs_error == pytest.approx(reference_check.mean_abs_error, abs=TOLERANCE)
    keys = ["example_id", "layer", "head", "kind"]
    assert_same_rows(reference.correlations.drop("spearman"), facts.correlations.drop("spearman"), keys)
    slack = spearman_slack(encoder, tokens, method)
    spearman = (
        reference.correlations.join(facts.correlations, on=keys, suffix="_placed")
        .join(slack.cast({key: reference.correlations.schema[key] for key in keys}), on=keys)
        .select("spearman", "spearman_placed", "slack")
    )
    assert spearman.height == reference.correlations.height
    assert ((spearman["spearman"] - spearman["spearman_placed"]).abs() <= spearman["slack"] + TOLERANCE).all()
    assert_same_rows(
        histogram_rows(reference.histograms, "contribution"),
        histogram_rows(facts.histograms, "contribution"),
        ["example_id", "kind", "scope", "layer", "head", "offset"],
    )


def test_gradient_importance(compute, tiny_mlm_dir: Path, demo_tokens):
    reference = extract_grad_importance(load_loss_model(str(tiny_mlm_dir)), demo_tokens, seed=0).rows
    loss_model = load_loss_model(str(tiny_mlm_dir), compute.device)
    assert loss_model.model.device.type == compute.device.type
    with placement_checked():
        rows = extract_grad_importance(loss_model, demo_tokens, seed=0).rows
    assert_same_rows(reference, rows, ["example_id", "layer", "head", "target_type"])


def _dependencies(words: pl.DataFrame) -> pl.DataFrame:
    """Made-up gold trees: every word's head is the word before it, the first word is the root."""
    return words.select(
        "example_id",
        "word_index",
        ud_id=pl.col("word_index") + 1,
        head_word_index=pl.when(pl.col("word_index") > 0).then(pl.col("word_index") - 1),
        upos=pl.lit("NOUN"),
    )


@dataclass(frozen=True)
class ProbeRun:
    """A trained probe's last-epoch loss and, per training batch on the CPU, its predicted heads
    (B, W) and its scores over the candidate heads (B, W, W + 1)."""

    loss: float
    heads: list[torch.Tensor]
    scores: list[torch.Tensor]

    def margins(self) -> list[torch.Tensor]:
        """Per batch (B, W): the lead of each word's top score over its next."""
        return [-scores.topk(2, -1).values.diff(dim=-1)[..., 0] for scores in self.scores]


def _probe(
    model: torch.nn.Module, tokens: pl.DataFrame, words: pl.DataFrame
) -> tuple[list[torch.Tensor], list[ProbeRun]]:
    """Train the attention-and-words probe and the distance baseline for 2 epochs on the training
    batches; the batches' scored words (B, W) on the CPU and each probe's run."""
    batches = probe_batches(model, tokens, words, _dependencies(words), 0, True, "mean", 256)
    runs = []
    for probe in (probe_for(batches[0], use_words=True, both_directions=True), distance_probe_for(batches[0], 8, 0)):
        loss = train_probe(probe, batches, epochs=2, learning_rate=0.05, seed=0)
        assert next(probe.parameters()).device.type == model.device.type
        with torch.no_grad():
            scores = [probe(batch).cpu() for batch in batches]
        runs.append(ProbeRun(loss, [predict_heads(probe, batch).cpu() for batch in batches], scores))
    return [batch.scored.cpu() for batch in batches], runs


def test_probes(compute, tiny_model_dir: Path, encoder, demo_tokens, words):
    scored, reference = _probe(encoder.model, demo_tokens, words)
    placed = load_encoder(str(tiny_model_dir), compute).model
    with placement_checked():
        _, runs = _probe(placed, demo_tokens, words)
        random_init = random_init_encoder(placed, seed=0)
    for run, expected in zip(runs, reference, strict=True):
        assert run.loss == pytest.approx(expected.loss, abs=TOLERANCE)
        batches = zip(run.heads, run.scores, expected.heads, expected.scores, expected.margins(), scored, strict=True)
        for heads, scores, expected_heads, expected_scores, margins, counted in batches:
            torch.testing.assert_close(scores[counted], expected_scores[counted], atol=TOLERANCE, rtol=TOLERANCE)
            clear = counted & (margins >= CLEAR_MARGIN)
            assert clear.any()
            assert torch.equal(heads[clear], expected_heads[clear])
    assert random_init.device.type == compute.device.type


@pytest.fixture(scope="module")
def task(demo_tokens) -> TaskData:
    per_example = (
        demo_tokens.sort("example_id", "position")
        .group_by("example_id", maintain_order=True)
        .agg("token_id", "segment")
    )
    return TaskData(
        per_example["example_id"].to_list(),
        [torch.tensor(ids) for ids in per_example["token_id"].to_list()],
        [torch.tensor(ids) for ids in per_example["segment"].to_list()],
        torch.tensor([float(example_id % 2) for example_id in per_example["example_id"].to_list()]),
    )


def _classifier(path: Path, device: torch.device) -> torch.nn.Module:
    model = build_classifier(str(path), "mrpc", "pretrained", seed=0, device=device)
    for module in model.modules():  # dropout draws differ between devices' generators
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    return model


def _fine_tuned(model: torch.nn.Module, task: TaskData) -> tuple[list[float], torch.Tensor]:
    log = fine_tune(model, task, Recipe(batch_size=4, max_steps=3), 0, True)
    return log.losses, predict_logits(model, task, 0, True, batch_size=4)


def test_fine_tuning(compute, tiny_model_dir: Path, task):
    losses, logits = _fine_tuned(_classifier(tiny_model_dir, CPU.device), task)
    model = _classifier(tiny_model_dir, compute.device)
    assert model.device.type == compute.device.type
    with placement_checked():
        placed_losses, placed_logits = _fine_tuned(model, task)
    assert placed_logits.device.type == "cpu"
    assert placed_losses == pytest.approx(losses, abs=TOLERANCE)
    assert torch.allclose(placed_logits, logits, atol=TOLERANCE)


def test_ablation(compute, tiny_classifier_dir: Path, task):
    disabled = ablation_settings(TINY_LAYERS, TINY_HEADS).disabled
    inputs = [pad_inputs(task, batch, 0, True) for batch in length_sorted_batches(task, 4)]
    reference = settings_logits(
        use_ablation_attention(load_classifier(str(tiny_classifier_dir))), inputs, disabled, 512
    )
    model = use_ablation_attention(load_classifier(str(tiny_classifier_dir), compute))
    with placement_checked():
        logits = settings_logits(model, inputs, disabled, 512)
    assert logits.shape == (1 + TINY_LAYERS * TINY_HEADS + TINY_LAYERS, len(task), 3)
    assert torch.allclose(logits, reference, atol=TOLERANCE)


def test_finetune_similarity(compute, tiny_model_dir: Path, tiny_mlm_dir: Path, encoder, demo_tokens):
    reference, _ = extract_finetune_cosines(encoder, load_encoder(str(tiny_mlm_dir)), demo_tokens)
    base, tuned = load_encoder(str(tiny_model_dir), compute), load_encoder(str(tiny_mlm_dir), compute)
    with placement_checked():
        cosines, _ = extract_finetune_cosines(base, tuned, demo_tokens)
    assert_same_rows(reference, cosines, ["example_id", "layer", "head"])
