"""Every compute protocol of `reproduce --quick` on one device, against the same protocol on the CPU, in
one process: what a session lent a GPU for a few minutes runs once.

Encoders with random weights (seed 0) and a masked-LM head, so Clark Fig. 3's gradient pass runs, at
MiniLM's size (6 x 12 x 384) and bert-base's (12 x 12 x 768); `--tiny`: 2 x 2 x 64, for the test suite.
Per (size, protocol): seconds on the device, seconds of the same inputs on the CPU, the largest
difference between the two (|device - cpu| / max(1, |cpu|), float columns and tensors) against the
tolerance of tests/device (1e-4; ranks and dropout-free fine-tuning as there), and peak device memory.

Protocols: the attention pass with every fact kind and every weighting (made-up spaCy flags, frame
and feature links, as tests/device); head distances of wiki_segments; HTA exact and the default
estimator; gradient importance; probes (attention-and-words and distance baseline, 2 epochs); a few
fine-tuning steps (dropout off) and the logits after; head ablation; fine-tune similarity (against a
second random encoder); head matching (the same two).

On a CPU the protocols run once (the CPU's run is the device's; nothing to compare), except with --tiny,
where the second run is cheap and exercises the comparison as on a GPU.

Then, on the device only: the fact pass of each corpus (xnli_en, wiki_segments, ud_ewt_test) against
the bare eager forward (bench/bench_device.py), and exact HTA seconds per example at bert-base's size
on a 64-piece example. The last three lines:
    worst fact-pass ratio R
    HTA exact s/example S (bert-base, 64 pieces)
    protocols failing N

Imports only the compute layer and the corpora (torch, transformers, numpy, polars, conllu): it runs in
the bare GPU bundle (../shared/tools/gpu_bundle).

Usage: OMP_WAIT_POLICY=PASSIVE python -m bench.device_check [--device cuda] [--quick] [--tiny]
--quick: 8 examples per protocol and corpus (HTA and ablation: one 8-piece sentence), and on a CPU an 8-piece
example for the HTA line (--tiny likewise).
"""

import argparse
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import torch
import transformers
from transformers import AutoConfig, AutoModelForMaskedLM, AutoTokenizer, PretrainedConfig

from bench.bench_device import CORPUS_NAMES, hta_seconds, measure_corpus, sdpa_model
from dagster_project.compute.attention_facts import feature_pair_links
from dagster_project.compute.attention_pass import extract_attention_facts, pass_inputs
from dagster_project.compute.clark.gradients import extract_grad_importance, load_loss_model
from dagster_project.compute.clark.probe_inputs import probe_batches
from dagster_project.compute.clark.probes import distance_probe_for, probe_for, train_probe
from dagster_project.compute.compare.head_matching import MatchSide, match_heads
from dagster_project.compute.devices import CPU, ComputeDevice, resolve_device, synchronize
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
from dagster_project.compute.models import DEFAULT_MODEL, inspect_model, load_encoder
from dagster_project.compute.pascual.hta import HtaMethod
from dagster_project.compute.pascual.hta_facts import DEFAULT_HTA_METHOD, extract_hta_facts
from dagster_project.compute.weightings import WEIGHTINGS
from dagster_project.corpora import CORPORA, encode_corpus
from dagster_project.settings import data_dir

SIZES = {
    "minilm": {},
    "bert-base": {"hidden_size": 768, "num_hidden_layers": 12, "intermediate_size": 3072},
    # d_head 32: xnli_en, cut at d_head pieces as its asset cuts it, still has examples that fit
    "tiny": {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 128},
}
# HTA and ablation take the shortest sentence of at least SHORT_PIECES pieces among SHORT_POOL of
# ud_ewt_test: exact HTA pushes n x D tangents through n pieces (bert-base at 8 pieces: 6 minutes on 2
# busy cores), ablation runs 1 + L x H + L forwards
SHORT_POOL, SHORT_PIECES = 64, 8
TOLERANCE = 1e-4  # tests/device/test_passes_on_device.py: device kernels differ in the last bits
HTA_PIECES = 64  # the exact-HTA line's example, at bert-base's size
QUICK_CPU_HTA_PIECES = 8  # --quick or --tiny on a CPU: bert-base at 64 pieces takes many minutes on 2 cores


@dataclass
class Inputs:
    """One size's checkpoints and corpus slices."""

    size: str
    folder: Path  # random encoder with a masked-LM head (seed 0)
    other: Path  # a second one (seed 1): the fine-tuned side of similarity and head matching
    classifier: Path  # the first with a random MRPC head, for ablation
    tokens: pl.DataFrame  # xnli_en pieces of the protocols' examples
    short_tokens: pl.DataFrame  # one short ud_ewt_test sentence: HTA and ablation
    words: pl.DataFrame  # their words with made-up spaCy flags and heads
    wiki_tokens: pl.DataFrame


@dataclass
class Outcome:
    size: str
    protocol: str
    device_seconds: float = float("nan")
    cpu_seconds: float = float("nan")
    difference: float = float("nan")
    peak_bytes: int | None = None
    error: str | None = None

    @property
    def passed(self) -> bool:
        return self.error is None and self.difference <= TOLERANCE


def random_checkpoint(size: str, folder: Path, seed: int) -> Path:
    """A BERT of `size` with a masked-LM head and random weights drawn with `seed`, with the default
    model's tokenizer, saved where load_encoder and load_loss_model read it."""
    source = inspect_model(DEFAULT_MODEL).resolved_path
    config: PretrainedConfig = AutoConfig.from_pretrained(source)
    for name, value in SIZES[size].items():
        setattr(config, name, value)
    config.architectures = ["BertForMaskedLM"]
    torch.manual_seed(seed)
    AutoModelForMaskedLM.from_config(config).save_pretrained(folder)
    AutoTokenizer.from_pretrained(source).save_pretrained(folder)
    return folder


def made_up_words(words: pl.DataFrame) -> pl.DataFrame:
    """`words` with the spaCy flags and heads the kinds and probes read, made up as tests/device does:
    every third word a verb, words 1 and 4 the subjects of 3 and 6."""
    index = pl.col("word_index")
    return words.with_columns(
        is_noun=index % 3 != 0,
        is_verb=index % 3 == 0,
        is_pronoun=index == 2,
        is_subject=index.is_in([1, 4]),
        is_object=pl.lit(False),
        is_negation=pl.lit(False),
        head_word_index=index.replace_strict({1: 3, 4: 6}, default=None, return_dtype=pl.Int32),
    )


def size_inputs(size: str, root: Path, examples: int) -> Inputs:
    folder = random_checkpoint(size, root / "encoder", 0)
    other = random_checkpoint(size, root / "other", 1)
    torch.manual_seed(0)
    classifier = build_classifier(str(folder), "mrpc", "pretrained", seed=0)
    classifier.save_pretrained(root / "classifier")
    AutoTokenizer.from_pretrained(folder).save_pretrained(root / "classifier")
    tokenizer = AutoTokenizer.from_pretrained(folder)
    xnli, wiki = CORPORA["xnli_en"], CORPORA["wiki_segments"]
    encoded = encode_corpus(xnli.read(data_dir()), tokenizer, 128, examples, xnli.seed, xnli.overlong)
    wiki_tokens = encode_corpus(wiki.read(data_dir()), tokenizer, wiki.max_len, examples, wiki.seed, wiki.overlong)
    ud = CORPORA["ud_ewt_test"]
    sentences = encode_corpus(ud.read(data_dir()), tokenizer, 128, SHORT_POOL, ud.seed, ud.overlong).tokens
    lengths = sentences.group_by("example_id").len().filter(pl.col("len") >= SHORT_PIECES)
    shortest = lengths.sort("len", "example_id")["example_id"].head(1)
    short_tokens = sentences.filter(pl.col("example_id").is_in(shortest.implode()))
    words = made_up_words(encoded.words)
    return Inputs(size, folder, other, root / "classifier", encoded.tokens, short_tokens, words, wiki_tokens.tokens)


# --- Protocols: each runs on one device and returns what is compared, floats on the CPU ---

Result = dict[str, torch.Tensor | pl.DataFrame | float]


def facts(inputs: Inputs, compute: ComputeDevice) -> Result:
    encoder = load_encoder(str(inputs.folder), compute)
    first = int(inputs.tokens["example_id"].min())
    links = pl.DataFrame(
        {"example_id": [first], "target_start": [0], "target_end": [1], "element_start": [2], "element_end": [4]}
    )
    options = pass_inputs(
        encoder,
        inputs.tokens,
        inputs.words,
        frame_links=links,
        feature_links=feature_pair_links(inputs.words),
        word_mode="max",
    )
    kinds = list(FACT_KINDS.values())
    return dict(extract_attention_facts(encoder, inputs.tokens, kinds, options, weightings=WEIGHTINGS).tables)


def head_distances(inputs: Inputs, compute: ComputeDevice) -> Result:
    encoder = load_encoder(str(inputs.folder), compute)
    kinds = [FACT_KINDS["head_distances"]]
    return {"head_distances": extract_attention_facts(encoder, inputs.wiki_tokens, kinds).tables["head_distances"]}


def hta(method: str) -> Callable[[Inputs, ComputeDevice], Result]:
    def run(inputs: Inputs, compute: ComputeDevice) -> Result:
        encoder = load_encoder(str(inputs.folder), compute)
        result = extract_hta_facts(encoder, inputs.short_tokens, HtaMethod.parse(method))
        # Spearman ranks nearly equal values, which may swap between devices (tests/device bounds it)
        return {"correlations": result.correlations.drop("spearman"), "histograms": result.histograms}

    return run


def gradients(inputs: Inputs, compute: ComputeDevice) -> Result:
    return {"rows": extract_grad_importance(load_loss_model(str(inputs.folder), compute.device), inputs.tokens, 0).rows}


def probes(inputs: Inputs, compute: ComputeDevice) -> Result:
    encoder = load_encoder(str(inputs.folder), compute)
    dependencies = inputs.words.select(
        "example_id",
        "word_index",
        ud_id=pl.col("word_index") + 1,
        head_word_index=pl.when(pl.col("word_index") > 0).then(pl.col("word_index") - 1),
        upos=pl.lit("NOUN"),
    )
    pad = encoder.tokenizer.pad_token_id or 0
    batches = probe_batches(
        encoder.model, inputs.tokens, inputs.words, dependencies, pad, encoder.spec.takes_token_types, "mean", 1024
    )
    losses = {}
    for name, probe in (
        ("attention_and_words", probe_for(batches[0], use_words=True, both_directions=True)),
        ("distance", distance_probe_for(batches[0], 8, 0)),
    ):
        losses[name] = train_probe(probe, batches, epochs=2, learning_rate=0.05, seed=0)
    return losses


def task_data(tokens: pl.DataFrame) -> TaskData:
    per_example = (
        tokens.sort("example_id", "position").group_by("example_id", maintain_order=True).agg("token_id", "segment")
    )
    ids = per_example["example_id"].to_list()
    return TaskData(
        ids,
        [torch.tensor(pieces) for pieces in per_example["token_id"].to_list()],
        [torch.tensor(segments) for segments in per_example["segment"].to_list()],
        torch.tensor([float(example_id % 2) for example_id in ids]),
    )


def fine_tuning(inputs: Inputs, compute: ComputeDevice) -> Result:
    model = build_classifier(str(inputs.folder), "mrpc", "pretrained", seed=0, device=compute.device)
    for module in model.modules():  # dropout masks come from each device's own generator
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    task = task_data(inputs.tokens)
    log = fine_tune(model, task, Recipe(batch_size=4, max_steps=3), 0, True)
    return {"losses": torch.tensor(log.losses), "logits": predict_logits(model, task, 0, True, batch_size=4)}


def ablation(inputs: Inputs, compute: ComputeDevice) -> Result:
    model = use_ablation_attention(load_classifier(str(inputs.classifier), compute))
    config = model.config
    task = task_data(inputs.short_tokens)
    batches = [pad_inputs(task, batch, 0, True) for batch in length_sorted_batches(task, 4)]
    disabled = ablation_settings(config.num_hidden_layers, config.num_attention_heads).disabled
    return {"logits": settings_logits(model, batches, disabled, 512).cpu()}


def similarity(inputs: Inputs, compute: ComputeDevice) -> Result:
    base, tuned = load_encoder(str(inputs.folder), compute), load_encoder(str(inputs.other), compute)
    return {"cosines": extract_finetune_cosines(base, tuned, inputs.tokens)[0]}


def head_matching(inputs: Inputs, compute: ComputeDevice) -> Result:
    sides = [
        MatchSide(load_encoder(str(folder), compute), inputs.tokens, inputs.words)
        for folder in (inputs.folder, inputs.other)
    ]
    return {"distances": match_heads(*sides).distances}


PROTOCOLS: dict[str, Callable[[Inputs, ComputeDevice], Result]] = {
    "attention facts (every kind, every weighting)": facts,
    "head distances": head_distances,
    "HTA exact": hta("exact"),
    f"HTA {DEFAULT_HTA_METHOD}": hta(DEFAULT_HTA_METHOD),
    "gradient importance": gradients,
    "probes": probes,
    "fine-tuning": fine_tuning,
    "ablation": ablation,
    "fine-tune similarity": similarity,
    "head matching": head_matching,
}


# --- Comparison ---


def scaled_difference(expected: torch.Tensor, got: torch.Tensor) -> float:
    """max |got - expected| / max(1, max |expected|), NaN where they differ in shape or NaN positions."""
    expected, got = expected.double().cpu(), got.double().cpu()
    if expected.shape != got.shape or not torch.equal(expected.isnan(), got.isnan()):
        return float("nan")
    if expected.numel() == 0:
        return 0.0
    scale = max(1.0, float(expected.nan_to_num().abs().max()))
    return float((got - expected).nan_to_num().abs().max()) / scale


def frame_difference(expected: pl.DataFrame, got: pl.DataFrame) -> float:
    """scaled_difference of the float columns (lists of floats flattened) after sorting both by every
    other column; NaN where the rows or those columns differ."""
    if expected.schema != got.schema or expected.height != got.height:
        return float("nan")
    keys = [name for name, dtype in expected.schema.items() if not (dtype.is_float() or isinstance(dtype, pl.List))]
    expected, got = expected.sort(keys), got.sort(keys)
    if not expected.select(keys).equals(got.select(keys)):
        return float("nan")
    differences = [0.0]
    for name, dtype in expected.schema.items():
        if isinstance(dtype, pl.List):
            flat = [frame.get_column(name).explode() for frame in (expected, got)]
            if flat[0].dtype.is_float():
                differences.append(
                    scaled_difference(*(torch.from_numpy(column.to_numpy(writable=True)) for column in flat))
                )
            elif not flat[0].equals(flat[1]):
                return float("nan")
        elif dtype.is_float():
            differences.append(
                scaled_difference(*(torch.from_numpy(frame[name].to_numpy(writable=True)) for frame in (expected, got)))
            )
    return max(differences, key=lambda value: float("inf") if value != value else value)


def result_difference(expected: Result, got: Result) -> float:
    if expected.keys() != got.keys():
        return float("nan")
    differences = [0.0]
    for name, value in expected.items():
        if isinstance(value, pl.DataFrame):
            differences.append(frame_difference(value, got[name]))
        else:
            differences.append(scaled_difference(torch.as_tensor(value), torch.as_tensor(got[name])))
    return max(differences, key=lambda value: float("inf") if value != value else value)


def timed(protocol: Callable[[Inputs, ComputeDevice], Result], inputs: Inputs, compute: ComputeDevice):
    device = compute.device
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    synchronize(device)
    started = time.perf_counter()
    result = protocol(inputs, compute)
    synchronize(device)
    seconds = time.perf_counter() - started
    peak = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None
    return result, seconds, peak


def check(name: str, inputs: Inputs, compute: ComputeDevice, against_cpu: bool) -> Outcome:
    """The protocol on `compute`, then, if `against_cpu`, on the CPU and the two compared; otherwise the
    device run stands for the CPU's (the device is the CPU) and nothing is compared."""
    outcome = Outcome(inputs.size, name)
    protocol = PROTOCOLS[name]
    try:
        got, outcome.device_seconds, outcome.peak_bytes = timed(protocol, inputs, compute)
        if not against_cpu:
            outcome.cpu_seconds, outcome.difference = outcome.device_seconds, 0.0
            return outcome
        expected, outcome.cpu_seconds, _ = timed(protocol, inputs, CPU)
        outcome.difference = result_difference(expected, got)
    except Exception as error:  # a failing protocol is reported and counted, and the others still run
        traceback.print_exc(file=sys.stdout)
        outcome.error = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
    return outcome


HEADER = f"{'size':<10} {'protocol':<46} {'device s':>9} {'cpu s':>8} {'difference':>10} {'peak MiB':>9}  status"


def outcome_line(outcome: Outcome) -> str:
    peak = "-" if outcome.peak_bytes is None else f"{outcome.peak_bytes / 2**20:.0f}"
    status = "ok" if outcome.passed else f"FAILED {outcome.error or f'difference above {TOLERANCE:g}'}"
    return (
        f"{outcome.size:<10} {outcome.protocol:<46} {outcome.device_seconds:>9.2f} {outcome.cpu_seconds:>8.2f} "
        f"{outcome.difference:>10.2g} {peak:>9}  {status}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="auto", help="cpu, cuda, cuda:N, mps (default: the best available)")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--tiny", action="store_true", help="2 x 2 x 64 encoders only (the test suite's run)")
    parser.add_argument("--examples", type=int, help="per protocol and corpus (default 16; --quick or --tiny 8)")
    args = parser.parse_args()
    transformers.logging.set_verbosity_error()  # each load of an MLM checkpoint as an encoder lists the head
    device = resolve_device(args.device, "--device")
    compute = ComputeDevice(device)
    on_cpu = device.type == "cpu"
    sizes = ["tiny"] if args.tiny else ["minilm", "bert-base"]
    examples = args.examples or (8 if args.quick or args.tiny else 16)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else device.type
    print(f"device {device} ({name}), torch {torch.__version__}, {torch.get_num_threads()} CPU threads", flush=True)
    print(HEADER, flush=True)
    outcomes, ratios = [], []
    hta_size, hta_pieces, hta_exact = "", 0, float("nan")
    with tempfile.TemporaryDirectory() as folder:
        for size in sizes:
            inputs = size_inputs(size, Path(folder) / size, examples)
            for protocol in PROTOCOLS:
                outcomes.append(check(protocol, inputs, compute, against_cpu=args.tiny or not on_cpu))
                print(outcome_line(outcomes[-1]), flush=True)
            encoder = load_encoder(str(inputs.folder), compute)
            sdpa = sdpa_model(inputs.folder, compute)
            for corpus in CORPUS_NAMES:
                row = measure_corpus(size, encoder, sdpa, corpus, examples, repeats=1)
                ratios.append((row.ratio, f"{size} {corpus}"))
                print(f"{size:<10} fact pass / bare eager forward, {corpus}: {row.ratio:.2f}x", flush=True)
            if size != "minilm":  # the HTA line's size: bert-base, or the tiny encoder with --tiny
                hta_size = size
                hta_pieces = QUICK_CPU_HTA_PIECES if (args.quick or args.tiny) and on_cpu else HTA_PIECES
                hta_exact = hta_seconds(encoder, hta_pieces, "exact", 1)
            del encoder, sdpa
    failing = [outcome for outcome in outcomes if not outcome.passed]
    for outcome in failing:
        print(f"failing: {outcome.size} {outcome.protocol}: {outcome.error or outcome.difference}")
    worst, where = min(ratios)
    print(f"(worst fact pass: {where})")
    print(f"worst fact-pass ratio {worst:.2f}")
    print(f"HTA exact s/example {hta_exact:.2f} ({hta_size}, {hta_pieces} pieces)")
    print(f"protocols failing {len(failing)}")


if __name__ == "__main__":
    main()
