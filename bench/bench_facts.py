"""Throughput of attention fact extraction against a bare forward pass and a naive baseline.

All three run in this process on the same examples and the same model:
  bare     length-bucketed batched forward pass, no attentions returned
  project  dagster_project.facts.extract_attention_facts (forward with attentions + every
           statistic), then the Arrow write of both fact tables to an in-memory DuckDB
  naive    one example per forward pass, numpy loops over layers, heads and offsets,
           one INSERT per row

Usage: OMP_WAIT_POLICY=PASSIVE python bench/bench_facts.py [--examples 96] [--corpus xnli_en]
Targets (issue 2): project >= 0.8x bare throughput, >= 20x naive.
"""

import argparse
import os
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import duckdb  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

from dagster_project.corpora import CORPORA, encode_corpus  # noqa: E402
from dagster_project.facts import DEFAULT_BATCH_TOKENS, extract_attention_facts, length_batches  # noqa: E402
from dagster_project.models import DEFAULT_MODEL, load_encoder  # noqa: E402
from dagster_project.settings import data_dir  # noqa: E402
from dagster_project.warehouse import ensure_schema, replace_partition  # noqa: E402


def bare_forward(encoder, tokens) -> None:
    with torch.inference_mode():
        for batch in length_batches(tokens, encoder.tokenizer.pad_token_id, DEFAULT_BATCH_TOKENS, encoder.spec.takes_token_types):
            encoder.model(**batch.inputs, output_attentions=False)


def project(encoder, tokens) -> None:
    facts = extract_attention_facts(encoder, tokens)
    conn = duckdb.connect(":memory:")
    replace_partition(
        conn, {"head_summaries": facts.head_summaries, "position_histograms": facts.position_histograms}, "m", "c"
    )


def naive(encoder, tokens) -> None:
    """What a notebook would do: per example, per head, per offset, per row."""
    conn = duckdb.connect(":memory:")
    ensure_schema(conn)
    for (example_id,), rows in tokens.sort("position").group_by("example_id"):
        ids = torch.tensor([rows["token_id"].to_list()])
        types = torch.tensor([rows["segment"].to_list()])
        with torch.no_grad():
            attentions = encoder.model(input_ids=ids, token_type_ids=types, output_attentions=True).attentions
        classes = np.array(rows["token_class"].to_list())
        n = len(classes)
        for layer, attention in enumerate(attentions):
            for head in range(attention.shape[1]):
                a = attention[0, head].numpy()
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
                    for offset in range(-(n - 1), n):
                        count = int(np.diag(np.outer(keep, keep), offset).sum())
                        if count:
                            conn.execute(
                                "INSERT INTO position_histograms VALUES ('m', 'c', ?, 'attention', ?, ?, ?, ?, ?, ?)",
                                [example_id, scope, layer + 1, head + 1, offset, float(np.trace(masked, offset)), count],
                            )


def timed(function, *args) -> float:
    started = time.perf_counter()
    function(*args)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", type=int, default=96)
    parser.add_argument("--corpus", default="xnli_en", choices=sorted(CORPORA))
    parser.add_argument("--model", default=DEFAULT_MODEL)
    args = parser.parse_args()
    spec = CORPORA[args.corpus]
    encoder = load_encoder(args.model)
    tokens = encode_corpus(spec.read(data_dir()), encoder.tokenizer, spec.max_len, args.examples, spec.seed).tokens
    n = tokens["example_id"].n_unique()
    print(f"model {args.model}, corpus {args.corpus}, {n} examples, {tokens.height} tokens, {torch.get_num_threads()} threads")
    bare_forward(encoder, tokens)  # warm-up
    seconds = {
        "bare forward": min(timed(bare_forward, encoder, tokens) for _ in range(3)),
        "project facts": min(timed(project, encoder, tokens) for _ in range(3)),
        "naive baseline": timed(naive, encoder, tokens),
    }
    for name, value in seconds.items():
        print(f"{name:>15}: {value:8.2f} s  {n / value:8.1f} examples/s")
    print(f"project / bare forward throughput: {seconds['bare forward'] / seconds['project facts']:.2f}x (target >= 0.8x)")
    print(f"project / naive throughput:        {seconds['naive baseline'] / seconds['project facts']:.1f}x (target >= 20x)")


if __name__ == "__main__":
    main()
