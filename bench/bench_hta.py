"""Speed and accuracy of HTA input contributions, all measured in this process on the same input.

  backward loop   one backward pass per head-output coordinate (the public HTA code's way);
                  timed on --backward-sample coordinates and scaled to all L*n*H*dh of them
  batched backward 64 cotangents per backward pass (vmap), timed and scaled the same way
  exact forward   one tangent per input coordinate (n*D), vectorized jvp, all layers at once
Then exact HTA chunking: seconds per example (wall, the device synchronized) and peak device memory
of exact input contributions on --chunk-examples XNLI examples spread over the length range, with the
chunk chosen from free memory (hta_estimators.chunk_for_memory, the default) against a fixed
--fixed-chunk tangents per jvp call, same process, same inputs; and the size of every tangent's output,
which the implementation before chunked reduction kept at once.
Then the estimator check the HTA asset runs, side by side for --methods (default: plain probes
estimate(k,bf16) at k = 8, 16, 32, the sketched hutchpp(r,k,bf16) of compute/pascual/hta_estimators.py,
and one with exact end tokens), exact against estimated input contributions on held-apart examples: a
seeded sample (--seed) of --check-examples XNLI examples (of at most --max-tokens pieces) spread over
the length range (hta_facts.check_sample, probes seeded as the run seeds them). Per method: CPU seconds
per example, the contributions' worst-layer Pearson (against --min-pearson) and the worst estimated
layer's gap of each published quantity (Fig. 6 Pearson and Spearman, center of mass, histogram mass:
hta.published_gaps on the aggregate over the examples) with its jackknife standard error over them,
against hta.PUBLISHED_TOLERANCES.
Last, the whole Pascual suite per example (attention, previous-layer and input contributions,
correlations, histograms: hta_facts.extract_hta_facts) on --suite-examples XNLI examples, with
REFERENCE (the default before hutchpp, "today's cost"), the default and the cheapest method meeting
every tolerance, projected to 1800 examples on 2 cores (two processes, one example at a time each).

Times are CPU seconds of this process (time.process_time): run it with OMP_NUM_THREADS=1 and they
are one core's seconds, which other jobs on a shared machine barely change (wall times do). The
chunking comparison alone is timed on the wall clock, so that it means something on a GPU (--device cuda).

XNLI (--corpus: xnli_en, or another HTA corpus) is encoded as the corpus asset does for the model: max_len =
the model's d_head.
Usage: OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE python -m bench.bench_hta [--tokens 30] [--check-examples 16]
       [--suite-examples 24] [--chunk-examples 4] [--fixed-chunk 128] [--device cpu] [--quick]
       [--methods M ...] [--max-tokens N] [--seed S] [--skip-chunking] [--corpus xnli_de] [--draws R]
--draws R: each method's probes drawn R times on the check's examples; prints each draw's gaps and those
of the maps averaged over the draws (probe noise falls as 1/sqrt(R), a bias stays).
--quick: no backward baselines, 2 examples for the chunking comparison, the check and the suite.
--suite-examples 0 skips the suite.
Targets: default >= 500x the backward loop; per estimated layer Pearson >= 0.99 at no more than
REFERENCE's cost; the 1800-example suite under 30 minutes on 2 cores.
"""

import argparse
import time
from resource import RUSAGE_SELF, getrusage

import polars as pl
import torch

from dagster_project.compute.batching import length_batches
from dagster_project.compute.devices import ComputeDevice, resolve_device, synchronize
from dagster_project.compute.models import DEFAULT_MODEL, load_encoder
from dagster_project.compute.pascual.hta import (
    PUBLISHED_TOLERANCES,
    HtaMethod,
    compare_contributions,
    context_function,
    input_norms,
    jackknife_gap_errors,
    normalize_rows,
    published_gaps,
    published_quantities,
)
from dagster_project.compute.pascual.hta_estimators import chunk_for_memory
from dagster_project.compute.pascual.hta_facts import check_sample, extract_hta_facts
from dagster_project.corpora import CORPORA, encode_corpus
from dagster_project.defs.assets.corpora import head_dimension
from dagster_project.defs.assets.pascual.hta import CHECK_EXAMPLES, CHECK_MIN_PEARSON, DEFAULT_HTA_METHOD
from dagster_project.settings import data_dir


def timed(function, *args):
    """(CPU seconds of this process, result)."""
    started = time.process_time()
    result = function(*args)
    return time.process_time() - started, result


def backward_seconds(model, e0: torch.Tensor, sample: int, batch: int) -> float:
    """Seconds for `sample` output coordinates, `batch` cotangents per backward pass."""
    x = e0[None].clone().requires_grad_(True)
    outputs = context_function(model)(x).reshape(-1)
    coordinates = torch.randperm(outputs.numel(), generator=torch.Generator().manual_seed(0))[:sample]
    started = time.process_time()
    for start in range(0, sample, batch):
        chosen = coordinates[start : start + batch]
        cotangents = torch.zeros(len(chosen), outputs.numel(), device=outputs.device)
        cotangents[torch.arange(len(chosen)), chosen] = 1
        if batch == 1:
            torch.autograd.grad(outputs, x, cotangents[0], retain_graph=True)
        else:
            torch.autograd.grad(outputs, x, cotangents, retain_graph=True, is_grads_batched=True)
    return time.process_time() - started


REFERENCE = HtaMethod.parse("estimate(32,bf16)")  # the default before hutchpp: the cost to beat
METHODS = [
    HtaMethod.parse(text)
    for text in (
        "estimate(8,bf16)",
        "estimate(16,bf16)",
        "estimate(32,bf16)",
        "hutchpp(12,8,bf16)",
        "hutchpp(16,8,bf16)",
        "hutchpp(16,16,bf16)",
        "hutchpp(24,8,bf16)",
        "hutchpp(16,8,bf16,ends=2)",
    )
]


def first_layer_input(model, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    """e^0 (n, D) of a batch of one: the first layer's input, as hta_facts takes it (on the model's device)."""
    inputs = {name: tensor.to(model.device) for name, tensor in inputs.items()}
    with torch.no_grad():
        return model(**inputs, output_hidden_states=True).hidden_states[0][0]


def chunk_comparison(encoder, tokens: pl.DataFrame, n_examples: int, fixed: int) -> None:
    """Exact HTA per example with the chunk chosen from memory against `fixed` tangents per jvp call:
    wall seconds and peak device memory (CUDA; the CPU's allocator keeps no such count)."""
    model = encoder.model
    device = model.device
    sample = tokens.filter(pl.col("example_id").is_in(check_sample(tokens, n_examples, seed=1)))
    pad = encoder.tokenizer.pad_token_id or 0
    inputs = [
        first_layer_input(model, batch.inputs)
        for batch in length_batches(sample, pad, 1, encoder.spec.takes_token_types)
    ]
    lengths = [e0.shape[0] for e0 in inputs]
    longest = inputs[lengths.index(max(lengths))]
    with torch.no_grad():
        tangent_bytes = context_function(model)(longest[None]).numel() * longest.element_size()
    print(
        f"exact HTA chunking on {len(inputs)} examples of {sorted(lengths)} tokens on {device}: the longest has "
        f"{longest.numel()} tangents of {tangent_bytes / 2**20:.2f} MiB output each, "
        f"{longest.numel() * tangent_bytes / 2**30:.2f} GiB for all of them (what the implementation before "
        f"chunked reduction kept at once); chunk from memory there: {chunk_for_memory(device, tangent_bytes)}",
        flush=True,
    )
    input_norms(model, inputs[0], HtaMethod(4))  # loads the kernels before either is timed
    for label, chunk in ((f"fixed chunk {fixed}", fixed), ("chunk from memory", None)):
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        synchronize(device)
        started = time.perf_counter()
        for e0 in inputs:
            input_norms(model, e0, HtaMethod(None), chunk_size=chunk)
        synchronize(device)
        seconds = (time.perf_counter() - started) / len(inputs)
        if device.type == "cuda":
            peak = f"peak allocated {torch.cuda.max_memory_allocated(device) / 2**30:.2f} GiB"
        else:
            rss = getrusage(RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux
            peak = f"peak device memory n/a on {device} (process peak RSS so far {rss:.2f} GiB)"
        print(f"  exact HTA, {label:>18}: {seconds:7.2f} s/example wall, {peak}", flush=True)


def contributions(model, e0: torch.Tensor, method: HtaMethod, generator: torch.Generator | None = None) -> torch.Tensor:
    return normalize_rows(input_norms(model, e0, method, generator))


def first_layer_input_and_attention(model, inputs: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """e^0 (n, D) and the attention maps (L, H, n, n) of a batch of one, from one forward."""
    inputs = {name: tensor.to(model.device) for name, tensor in inputs.items()}
    with torch.no_grad():
        output = model(**inputs, output_hidden_states=True, output_attentions=True)
    return output.hidden_states[0][0], torch.stack(output.attentions)[:, 0]


def _worst(gaps: dict[int, float], errors: dict[int, float]) -> tuple[int, float, float]:
    """(layer, gap, its jackknife standard error) of the largest gap."""
    layer = max(gaps, key=gaps.__getitem__)
    return layer, gaps[layer], errors[layer]


# draw r of an example seeds its probes with seed + example id + r * stride (r = 0: the run's)
DRAW_SEED_STRIDE = 100_003


def estimator_check(
    encoder,
    tokens: pl.DataFrame,
    n_examples: int,
    min_pearson: float,
    methods: list[HtaMethod],
    seed: int = 0,
    draws: int = 1,
) -> HtaMethod | None:
    """Every method against exact HTA on held-apart examples, as the asset's check scores it: CPU
    seconds per example, the contributions' worst-layer Pearson and the worst layer's gap of each
    published quantity (hta.published_gaps on the aggregate over the examples) with its jackknife
    standard error over them. Returns the cheapest method that meets every tolerance (None: none).
    With `draws` > 1, each method's probes are drawn that many times on the same examples: the gaps of
    each draw, and those of the maps averaged over the draws, whose probe noise is sqrt(draws) times
    smaller while a bias stays (what a gap on the check's few examples cannot tell apart)."""
    model = encoder.model
    chosen = check_sample(tokens, n_examples, seed)
    sample = tokens.filter(pl.col("example_id").is_in(chosen))
    attention, exact = [], []
    estimated = {method: [[] for _ in range(draws)] for method in methods}
    seconds = {method: 0.0 for method in [None, *methods]}
    for batch in length_batches(sample, encoder.tokenizer.pad_token_id or 0, 1, encoder.spec.takes_token_types):
        e0, maps = first_layer_input_and_attention(model, batch.inputs)
        attention.append(maps)
        took, maps = timed(contributions, model, e0, HtaMethod(None))
        seconds[None] += took
        exact.append(maps)
        for method in methods:
            for draw in range(draws):
                generator = torch.Generator().manual_seed(seed + int(batch.example_ids[0]) + draw * DRAW_SEED_STRIDE)
                took, maps = timed(contributions, model, e0, method, generator)
                seconds[method] += took / draws
                estimated[method][draw].append(maps)
        print(f"  example {int(batch.example_ids[0])} ({e0.shape[0]} tokens) done", flush=True)
    if draws > 1:
        draw_gaps(attention, exact, estimated)
    lengths = sorted(sample.group_by("example_id").len()["len"].to_list())
    count = len(exact)
    print(
        f"estimator check on {count} examples of {lengths} tokens; exact HTA {seconds[None] / count:.1f} "
        f"cpu-s/example. Gaps: the worst estimated layer's |estimate - exact| of each published quantity on the "
        f"aggregate over the {count} examples, +- its jackknife standard error over them; tolerances "
        + ", ".join(f"{name} {tolerance}" for name, tolerance in PUBLISHED_TOLERANCES.items()),
        flush=True,
    )
    reference = next((method for method in methods if method == REFERENCE), methods[0])
    meeting = []
    for method in methods:
        first = estimated[method][0]  # the probes the run draws
        error = compare_contributions(exact, first)
        worst = min(error.layer_pearson.values())
        gaps = published_gaps(published_quantities(attention, exact), published_quantities(attention, first))
        errors = jackknife_gap_errors(attention, exact, first)
        columns, misses = [], []
        for name, tolerance in PUBLISHED_TOLERANCES.items():
            layer, gap, spread = _worst(gaps[name], errors[name])
            columns.append(f"{name} {gap:.4f}+-{spread:.4f} (L{layer})")
            if not gap <= tolerance:
                misses.append(name)
        if worst < min_pearson:
            misses.insert(0, "contribution pearson")
        if not misses:
            meeting.append((seconds[method], method))
        marker = "  <- default" if str(method) == DEFAULT_HTA_METHOD else ""
        per_example = seconds[method] / count
        print(
            f"{str(method):>20}: {per_example:6.2f} cpu-s/example ({seconds[None] / seconds[method]:5.1f}x faster "
            f"than exact, {seconds[method] / seconds[reference]:.2f}x {reference}); contribution pearson worst "
            f"{worst:.4f}; "
            + "; ".join(columns)
            + ("; meets every tolerance" if not misses else f"; misses {', '.join(misses)}")
            + marker,
            flush=True,
        )
    cheapest = min(meeting, key=lambda pair: pair[0])[1] if meeting else None
    print(f"cheapest method meeting every tolerance on these examples: {cheapest or 'none (use exact)'}")
    return cheapest


def draw_gaps(
    attention: list[torch.Tensor], exact: list[torch.Tensor], estimated: dict[HtaMethod, list[list[torch.Tensor]]]
) -> None:
    """Per method, the worst estimated layer's gap of each published quantity for each probe draw, and for
    the maps averaged over the draws (per layer for the center of mass)."""
    exact_quantities = published_quantities(attention, exact)
    for method, draws in estimated.items():
        per_draw = [published_gaps(exact_quantities, published_quantities(attention, maps)) for maps in draws]
        averaged = [torch.stack(maps).mean(0) for maps in zip(*draws, strict=True)]
        mean_gaps = published_gaps(exact_quantities, published_quantities(attention, averaged))
        columns = [
            f"{name} "
            + " ".join(f"{max(gaps[name].values()):.4f}" for gaps in per_draw)
            + f" (averaged maps {max(mean_gaps[name].values()):.4f})"
            for name in PUBLISHED_TOLERANCES
        ]
        layers = " ".join(f"L{layer} {gap:.4f}" for layer, gap in mean_gaps["center_of_mass"].items())
        print(
            f"{str(method):>20} over {len(draws)} probe draws: "
            + "; ".join(columns)
            + f"; averaged maps' center of mass per layer: {layers}",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=30, help="length of the single input (an XNLI pair)")
    parser.add_argument("--backward-sample", type=int, default=256)
    parser.add_argument("--check-examples", type=int, default=CHECK_EXAMPLES)
    parser.add_argument("--min-pearson", type=float, default=CHECK_MIN_PEARSON)
    parser.add_argument("--suite-examples", type=int, default=24)
    parser.add_argument("--skip-baselines", action="store_true", help="skip the backward loops and the single input")
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--chunk-examples", type=int, default=4, help="examples for the exact HTA chunking comparison")
    parser.add_argument(
        "--fixed-chunk", type=int, default=128, help="the fixed chunk compared with the chunk from memory"
    )
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N, mps or auto")
    parser.add_argument(
        "--methods", nargs="+", default=[str(method) for method in METHODS], help="the estimators compared with exact"
    )
    parser.add_argument("--max-tokens", type=int, help="check only examples of at most this many pieces (short: cheap)")
    parser.add_argument("--skip-chunking", action="store_true", help="skip the exact HTA chunking comparison")
    parser.add_argument("--seed", type=int, default=0, help="seeds the held-apart sample (check_sample), as a run's")
    parser.add_argument("--quick", action="store_true", help="no backward baselines; 2 examples per section")
    parser.add_argument(
        "--draws", type=int, default=1, help="probe draws per method and example (> 1: the gaps of each, and averaged)"
    )
    parser.add_argument(
        "--corpus", default="xnli_en", choices=[name for name, spec in CORPORA.items() if spec.hta], help="HTA corpus"
    )
    args = parser.parse_args()
    if args.quick:
        args.skip_baselines = True
        args.chunk_examples = args.check_examples = args.suite_examples = 2
    encoder = load_encoder(args.model, ComputeDevice(resolve_device(args.device)))
    model = encoder.model
    spec = CORPORA[args.corpus]
    max_len = spec.default_max_len(head_dimension(model.config))
    encoded = encode_corpus(spec.read(data_dir()), encoder.tokenizer, max_len, spec.size, spec.seed)
    example = encoded.examples.filter(pl.col("n_tokens") == args.tokens)["example_id"][0]
    tokens = encoded.tokens.filter(pl.col("example_id") == example)
    ids = torch.tensor([tokens["token_id"].to_list()])
    e0 = first_layer_input(model, {"input_ids": ids, "token_type_ids": torch.tensor([tokens["segment"].to_list()])})
    n, width = e0.shape
    layers, heads = model.config.num_hidden_layers, model.config.num_attention_heads
    outputs = layers * n * width  # head-output coordinates: L * n * H * dh
    print(
        f"model {args.model}: {layers} layers x {heads} heads, D={width}; XNLI max_len {max_len}; one {n}-token "
        f"input; {torch.get_num_threads()} threads",
        flush=True,
    )

    if not args.skip_baselines:
        loop = backward_seconds(model, e0, args.backward_sample, 1) * outputs / args.backward_sample
        batched = backward_seconds(model, e0, args.backward_sample, 64) * outputs / args.backward_sample
        print(f"backward loop (scaled from {args.backward_sample} of {outputs} outputs): {loop:9.1f} cpu-s", flush=True)
        print(f"batched backward x64 (scaled the same way):       {batched:9.1f} cpu-s", flush=True)
        exact_seconds, _ = timed(lambda: input_norms(model, e0, HtaMethod(None)))
        default_seconds, _ = timed(lambda: input_norms(model, e0, HtaMethod.parse(DEFAULT_HTA_METHOD)))
        print(f"exact forward mode ({n * width} tangents):             {exact_seconds:9.1f} cpu-s", flush=True)
        print(
            f"default {DEFAULT_HTA_METHOD}: {default_seconds:.2f} cpu-s, {loop / default_seconds:.0f}x loop, "
            f"{exact_seconds / default_seconds:.1f}x exact",
            flush=True,
        )
    if not args.skip_chunking:
        chunk_comparison(encoder, encoded.tokens, args.chunk_examples, args.fixed_chunk)
    methods = [HtaMethod.parse(text) for text in args.methods]
    held_apart = encoded.tokens
    if args.max_tokens:
        short = encoded.examples.filter(pl.col("n_tokens") <= args.max_tokens)["example_id"]
        held_apart = held_apart.filter(pl.col("example_id").is_in(short.implode()))
    if held_apart.is_empty():
        parser.error(f"--max-tokens {args.max_tokens}: no XNLI example is that short; raise it")
    cheapest = estimator_check(
        encoder, held_apart, args.check_examples, args.min_pearson, methods, args.seed, args.draws
    )
    if not args.suite_examples:
        return
    sample = encoded.tokens.filter(
        pl.col("example_id").is_in(encoded.examples["example_id"].sample(args.suite_examples, seed=0).implode())
    )
    mean_tokens = sample.group_by("example_id").len()["len"].mean()
    suite = {}
    for method in dict.fromkeys([REFERENCE, HtaMethod.parse(DEFAULT_HTA_METHOD), cheapest or REFERENCE]):
        took, facts = timed(extract_hta_facts, encoder, sample, method)
        suite[method] = took / facts.n_examples
        print(
            f"Pascual suite ({method}) on {facts.n_examples} random XNLI examples (mean {mean_tokens:.1f} tokens): "
            f"{suite[method]:.2f} cpu-s/example ({suite[method] / suite[REFERENCE]:.2f}x reference) -> "
            f"1800 examples on 2 cores: {suite[method] * 1800 / 2 / 60:.0f} min (target < 30)",
            flush=True,
        )


if __name__ == "__main__":
    main()
