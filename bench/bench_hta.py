"""Speed and accuracy of HTA input contributions, all measured in this process on the same input.

  backward loop   one backward pass per head-output coordinate (the public HTA code's way);
                  timed on --backward-sample coordinates and scaled to all L*n*H*dh of them
  batched backward 64 cotangents per backward pass (vmap), timed and scaled the same way
  exact forward   one tangent per input coordinate (n*D), vectorized jvp, all layers at once
  estimate(k)     k orthogonal probes per input token (float32, and bfloat16 products);
                  Pearson and mean |error| against exact
Then the whole Pascual suite per example (attention, previous-layer and input contributions,
correlations, histograms: hta_facts.extract_hta_facts) on --suite-examples XNLI examples,
projected to 1800.

Usage: OMP_WAIT_POLICY=PASSIVE python bench/bench_hta.py [--tokens 34] [--suite-examples 24]
Targets (issue 7): default >= 500x the backward loop and >= 50x exact forward mode;
the 1800-example suite under 30 minutes on 2 cores.
"""

import argparse
import os
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import polars as pl  # noqa: E402
import torch  # noqa: E402

from dagster_project.compute.hta import HtaMethod, context_function, input_norms, normalize_rows  # noqa: E402
from dagster_project.compute.hta_facts import extract_hta_facts  # noqa: E402
from dagster_project.compute.models import DEFAULT_MODEL, load_encoder  # noqa: E402
from dagster_project.corpora import CORPORA, encode_corpus  # noqa: E402
from dagster_project.defs.assets.hta import DEFAULT_HTA_METHOD  # noqa: E402
from dagster_project.settings import data_dir  # noqa: E402


def timed(function, *args):
    started = time.perf_counter()
    result = function(*args)
    return time.perf_counter() - started, result


def backward_seconds(model, e0: torch.Tensor, sample: int, batch: int) -> float:
    """Seconds for `sample` output coordinates, `batch` cotangents per backward pass."""
    x = e0[None].clone().requires_grad_(True)
    outputs = context_function(model)(x).reshape(-1)
    coordinates = torch.randperm(outputs.numel(), generator=torch.Generator().manual_seed(0))[:sample]
    started = time.perf_counter()
    for start in range(0, sample, batch):
        chosen = coordinates[start : start + batch]
        cotangents = torch.zeros(len(chosen), outputs.numel())
        cotangents[torch.arange(len(chosen)), chosen] = 1
        if batch == 1:
            torch.autograd.grad(outputs, x, cotangents[0], retain_graph=True)
        else:
            torch.autograd.grad(outputs, x, cotangents, retain_graph=True, is_grads_batched=True)
    return time.perf_counter() - started


def pearson(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(torch.corrcoef(torch.stack([a.flatten(), b.flatten()]))[0, 1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--tokens", type=int, default=34, help="length of the single input (an XNLI pair of that length)"
    )
    parser.add_argument("--backward-sample", type=int, default=256)
    parser.add_argument("--suite-examples", type=int, default=24)
    parser.add_argument("--model", default=DEFAULT_MODEL)
    args = parser.parse_args()
    encoder = load_encoder(args.model)
    model = encoder.model
    spec = CORPORA["xnli_en"]
    encoded = encode_corpus(spec.read(data_dir()), encoder.tokenizer, spec.max_len, spec.size, spec.seed)
    example = encoded.examples.filter(pl.col("n_tokens") == args.tokens)["example_id"][0]
    tokens = encoded.tokens.filter(pl.col("example_id") == example)
    ids = torch.tensor([tokens["token_id"].to_list()])
    with torch.no_grad():
        e0 = model.embeddings(input_ids=ids, token_type_ids=torch.tensor([tokens["segment"].to_list()]).long())[0]
    n, width = e0.shape
    layers, heads = model.config.num_hidden_layers, model.config.num_attention_heads
    outputs = layers * n * width  # head-output coordinates: L * n * H * dh
    print(
        f"model {args.model}: {layers} layers x {heads} heads, D={width}; one {n}-token input; "
        f"{torch.get_num_threads()} threads",
        flush=True,
    )

    loop = backward_seconds(model, e0, args.backward_sample, 1) * outputs / args.backward_sample
    batched = backward_seconds(model, e0, args.backward_sample, 64) * outputs / args.backward_sample
    print(f"backward loop (scaled from {args.backward_sample} of {outputs} outputs): {loop:9.1f} s", flush=True)
    print(f"batched backward x64 (scaled the same way):       {batched:9.1f} s", flush=True)
    exact_seconds, exact = timed(lambda: normalize_rows(input_norms(model, e0, HtaMethod(None))))
    print(f"exact forward mode ({n * width} tangents):             {exact_seconds:9.1f} s", flush=True)
    default = HtaMethod.parse(DEFAULT_HTA_METHOD)
    for method in [HtaMethod(k, bf16) for k in (1, 2, 4, 8, 16) for bf16 in (False, True)]:
        seconds, estimate = timed(
            lambda method=method: normalize_rows(input_norms(model, e0, method, torch.Generator().manual_seed(1)))
        )
        marker = "  <- default" if method == default else ""
        print(
            f"{str(method):>17}: {seconds:6.2f} s  pearson {pearson(estimate, exact):.4f}  "
            f"mean|err| {float((estimate - exact).abs().mean()):.5f}"
            f"  {loop / seconds:7.0f}x loop  {exact_seconds / seconds:6.1f}x exact{marker}",
            flush=True,
        )
    sample = encoded.tokens.filter(
        pl.col("example_id").is_in(encoded.examples["example_id"].sample(args.suite_examples, seed=0).implode())
    )
    facts = extract_hta_facts(encoder, sample, default)
    per_example = facts.seconds / facts.n_examples
    mean_tokens = sample.group_by("example_id").len()["len"].mean()
    print(
        f"Pascual suite ({default}) on {facts.n_examples} random XNLI examples (mean {mean_tokens:.1f} tokens): "
        f"{per_example:.2f} s/example -> 1800 examples: {per_example * 1800 / 60:.0f} min (target < 30)"
    )


if __name__ == "__main__":
    main()
