"""Throughput of attention fact extraction against a bare forward pass and a naive baseline.

All run in this process on the same examples and the same model:
  bare     length-bucketed batched forward pass, no attentions returned
  extract  dagster_project.compute.attention_pass.extract_attention_facts: forward with attentions, every
           statistic, the fact frames ready to write
  write    the Arrow write of both fact tables to an in-memory DuckDB
  naive    one example per forward pass, numpy loops over layers, heads and offsets,
           one INSERT per row (statistics and storage, so it compares with extract + write);
  Both write the dense grain of sql/schema/position_histograms.sql (a row per example, scope,
  layer and head, with the per-offset lists).

The naive baseline loops over every offset of every head in Python and inserts one row per
(example, scope, layer, head) at a time, so it runs on the first --naive-examples of the same
examples; ratios compare throughput (examples/s).

With --weightings attention,norm,rollout the pass with those weightings (compute/weightings.py) is
timed too, interleaved with the others, and reported as a ratio of seconds to the attention-only pass.

Usage: OMP_WAIT_POLICY=PASSIVE python -m bench.bench_facts [--examples 512] [--naive-examples 16]
       [--weightings attention,norm,rollout]
The device and forward dtype come from ATTN_DEVICE / ATTN_DTYPE (docs/operations/devices.md).
Targets: extraction >= 0.8x bare throughput, >= 20x naive; extract+write >= 0.8x bare.
"""

import argparse
import time

import duckdb
import numpy as np
import polars as pl
import torch

from dagster_project.compute.attention_pass import AttentionFacts, extract_attention_facts
from dagster_project.compute.batching import length_batches
from dagster_project.compute.devices import resolve
from dagster_project.compute.models import DEFAULT_MODEL, load_encoder
from dagster_project.compute.weightings import WEIGHTINGS, check_weightings
from dagster_project.corpora import CORPORA, encode_corpus
from dagster_project.settings import compute_device, compute_dtype, data_dir
from dagster_project.storage.partition_writes import replace_partition
from dagster_project.storage.schema import ensure_schema


def bare_forward(encoder, tokens) -> None:
    with torch.inference_mode():
        for batch in length_batches(
            tokens, encoder.tokenizer.pad_token_id, encoder.compute.batch_tokens(), encoder.spec.takes_token_types
        ):
            encoder.model(**batch.to(encoder.compute.device).inputs, output_attentions=False)
    if encoder.compute.device.type == "cuda":
        torch.cuda.synchronize()  # the statistics' copies back to the CPU synchronize `extract` alike


def extract(encoder, tokens, weightings: tuple[str, ...] = ("attention",)) -> AttentionFacts:
    return extract_attention_facts(encoder, tokens, weightings=weightings)


def write(facts: AttentionFacts) -> None:
    conn = duckdb.connect(":memory:")
    replace_partition(conn, facts.tables, "m", "c")


def naive(encoder, tokens) -> None:
    """What a notebook would do: per example, per head, per offset, per row."""
    conn = duckdb.connect(":memory:")
    ensure_schema(conn)
    for (example_id,), rows in tokens.sort("position").group_by("example_id"):
        ids = torch.tensor([rows["token_id"].to_list()], device=encoder.compute.device)
        types = torch.tensor([rows["segment"].to_list()], device=encoder.compute.device)
        with torch.no_grad():
            attentions = encoder.model(input_ids=ids, token_type_ids=types, output_attentions=True).attentions
        classes = np.array(rows["token_class"].to_list())
        n = len(classes)
        for layer, attention in enumerate(attentions):
            for head in range(attention.shape[1]):
                a = attention[0, head].float().cpu().numpy()
                logs = np.log(np.where(a > 0, a, 1.0))
                stats = [
                    a[:, classes == "cls"].sum(1).mean(),
                    a[:, classes == "sep"].sum(1).mean(),
                    a[:, classes == "punct"].sum(1).mean(),
                    np.diag(a).mean(),
                    np.diag(a, -1).mean(),
                    np.diag(a, 1).mean(),
                    a[classes == "sep"][:, classes == "sep"].sum(1).mean(),
                    -(a * logs).sum(1).mean(),
                    -(a[0] * logs[0]).sum(),
                ]
                conn.execute(
                    "INSERT INTO head_summaries (model_id, corpus, example_id, layer, head, n_tokens, to_cls, to_sep, "
                    "to_punct, to_self, to_prev, to_next, sep_to_sep, entropy, cls_entropy) "
                    "VALUES ('m', 'c', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [example_id, layer + 1, head + 1, n, *map(float, stats)],
                )
                content = (classes != "cls") & (classes != "sep")
                for scope, keep in (("all", np.ones(n, bool)), ("content", content)):
                    masked = a * np.outer(keep, keep)
                    counts, means = [], []
                    for offset in range(-(n - 1), n):
                        count = int(np.diag(np.outer(keep, keep), offset).sum())
                        counts.append(count)
                        means.append(1.0 + (float(np.trace(masked, offset)) / count) ** 0.5 if count else 1.0)
                    reach = max((abs(offset) for offset, count in zip(range(-(n - 1), n), counts) if count), default=-1)
                    if reach >= 0:
                        kept = slice(n - 1 - reach, n + reach)
                        conn.execute(
                            "INSERT INTO position_histograms (model_id, corpus, example_id, scope, layer, head, "
                            "pair_counts, one_plus_sqrt_mean_weights) VALUES ('m', 'c', ?, ?, ?, ?, ?, ?)",
                            [
                                example_id,
                                scope,
                                layer + 1,
                                head + 1,
                                counts[kept] if layer == head == 0 else None,
                                means[kept],
                            ],
                        )


def timed(function, *args) -> float:
    started = time.perf_counter()
    function(*args)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", type=int, default=512)
    parser.add_argument("--naive-examples", type=int, default=16)
    parser.add_argument("--corpus", default="xnli_en", choices=sorted(CORPORA))
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument(
        "--weightings",
        type=lambda text: check_weightings(text.split(",")),
        default=("attention",),
        help="comma-separated, of " + ", ".join(WEIGHTINGS) + ": also time the pass with them",
    )
    args = parser.parse_args()
    spec = CORPORA[args.corpus]
    encoder = load_encoder(args.model, resolve(compute_device(), compute_dtype()))
    tokens = encode_corpus(spec.read(data_dir()), encoder.tokenizer, spec.max_len, args.examples, spec.seed).tokens
    naive_tokens = tokens.filter(
        pl.col("example_id").is_in(tokens["example_id"].unique().sort()[: args.naive_examples].implode())
    )
    print(
        f"model {args.model}, corpus {args.corpus}, {tokens.height} tokens, {encoder.compute}, "
        f"{torch.get_num_threads()} threads",
        flush=True,
    )
    bare_forward(encoder, tokens)  # warm-up
    bare, extracted, written, weighted = [], [], [], []
    for _ in range(5):  # interleaved, so drift in machine load hits both alike; min of 5
        bare.append(timed(bare_forward, encoder, tokens))
        started = time.perf_counter()
        facts = extract(encoder, tokens)
        extracted.append(time.perf_counter() - started)
        written.append(timed(write, facts))
        if len(args.weightings) > 1:
            weighted.append(timed(extract, encoder, tokens, args.weightings))
    runs = {
        "bare forward": (tokens, min(bare)),
        "extract facts": (tokens, min(extracted)),
        "write facts": (tokens, min(written)),
        "extract+write": (tokens, min(extracted) + min(written)),
        "naive baseline": (naive_tokens, timed(naive, encoder, naive_tokens)),
    }
    rate = {}
    for name, (subset, seconds) in runs.items():
        examples = subset["example_id"].n_unique()
        rate[name] = examples / seconds
        print(f"{name:>15}: {examples:5d} examples {seconds:8.2f} s {rate[name]:8.1f} examples/s")
    print(
        f"histogram rows written: {facts.tables['position_histograms'].height} (per example, scope, layer, head), "
        f"head-summary rows: {facts.tables['head_summaries'].height}"
    )
    print(
        f"extract / bare forward throughput:       {rate['extract facts'] / rate['bare forward']:.2f}x (target >= 0.8x)"
    )
    print(
        f"extract+write / bare forward throughput: {rate['extract+write'] / rate['bare forward']:.2f}x (target >= 0.8x)"
    )
    print(
        f"extract+write / naive throughput:        {rate['extract+write'] / rate['naive baseline']:.0f}x"
        " (target >= 20x)"
    )
    if weighted:
        names = ",".join(args.weightings)
        print(f"extract facts ({names}): {min(weighted):8.2f} s")
        print(f"extract ({names}) / extract (attention) seconds: {min(weighted) / min(extracted):.2f}x")


if __name__ == "__main__":
    main()
