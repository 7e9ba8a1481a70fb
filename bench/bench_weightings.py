"""Cost of each weighting of the maps (compute/weightings.py) against the bare forward, and batched value
zeroing against one zeroing per forward.

All run in this process on the same examples and the same model:
  bare           length-bucketed batched forward pass, no attentions returned
  <weighting>    the same batches' forward with attentions (and the hooks the weighting needs) and the
                 weighting's maps, as the attention pass computes them (no statistics, no frames)
  zeroing loops  value zeroing one zeroing at a time, on the first --loop-examples examples, against the
                 batched value_zeroing maps of the same examples:
                 - one forward per zeroing (the baseline the target is set against): per example, layer
                   and token, the whole model run with that layer's value vector of the token zeroed (a
                   hook on the value projection), the cosine distance of the layer's outputs;
                 - one layer call per zeroing (Mohebbi et al.'s own loop): that layer alone re-run from
                   its original input, the rest as above

Usage: OMP_WAIT_POLICY=PASSIVE python -m bench.bench_weightings [--examples 32] [--loop-examples 2]
The device and forward dtype come from ATTN_DEVICE / ATTN_DTYPE (docs/operations/devices.md).
Target: batched value zeroing >= 20x the throughput of the loop.
"""

import argparse
import time
from collections.abc import Callable

import polars as pl
import torch
import torch.nn.functional as F

from dagster_project.compute.attention_layouts import attention_blocks, attention_layout
from dagster_project.compute.batching import length_batches
from dagster_project.compute.devices import float32_maps, resolve
from dagster_project.compute.models import DEFAULT_MODEL, LoadedEncoder, load_encoder
from dagster_project.compute.weightings import WEIGHTINGS, ModelWeightings, captured_layers
from dagster_project.corpora import CORPORA, encode_corpus
from dagster_project.settings import compute_device, compute_dtype, data_dir


def _synchronized(encoder: LoadedEncoder) -> None:
    if encoder.compute.device.type == "cuda":
        torch.cuda.synchronize()


def _batches(encoder: LoadedEncoder, tokens: pl.DataFrame) -> list:
    return list(
        length_batches(
            tokens, encoder.tokenizer.pad_token_id or 0, encoder.compute.batch_tokens(), encoder.spec.takes_token_types
        )
    )


def bare_forward(encoder: LoadedEncoder, tokens: pl.DataFrame) -> None:
    with torch.inference_mode():
        for batch in _batches(encoder, tokens):
            encoder.model(**batch.to(encoder.compute.device).inputs, output_attentions=False)
    _synchronized(encoder)


def weighting_maps(encoder: LoadedEncoder, tokens: pl.DataFrame, weighting: str) -> list[torch.Tensor]:
    """The pass's forward and `weighting`'s maps, batch by batch, as compute/attention_pass.py runs them."""
    chosen = ModelWeightings.of(encoder.model, [weighting])
    maps = []
    with torch.inference_mode(), captured_layers(encoder.model, with_norms=chosen.needs_norms) as captured:
        for batch in _batches(encoder, tokens):
            batch = batch.to(encoder.compute.device)
            attn = float32_maps(encoder.model(**batch.inputs, output_attentions=True).attentions)
            maps.append(chosen.maps(attn, batch.masks.valid, captured.take()).maps[weighting])
    _synchronized(encoder)
    return maps


def zeroing_loop(encoder: LoadedEncoder, tokens: pl.DataFrame, whole_model: bool) -> None:
    """One zeroing per call, over examples, layers and tokens: a forward of the whole model (`whole_model`)
    or a call of the zeroed layer alone on its original input (the authors' loop)."""
    model = encoder.model
    layout = attention_layout(model)
    layers = layout.layers(model.base_model)
    blocks = attention_blocks(model)
    device = encoder.compute.device
    for (_,), rows in tokens.sort("position").group_by("example_id", maintain_order=True):
        inputs = {
            "input_ids": torch.tensor([rows["token_id"].to_list()], device=device),
            "token_type_ids": torch.tensor([rows["segment"].to_list()], device=device),
        }
        n_tokens = rows.height
        with torch.inference_mode():
            hidden = model(**inputs, output_hidden_states=True).hidden_states
            for layer, module in enumerate(layers):
                value = blocks[layer].get_submodule(layout.value)
                scores = torch.zeros(n_tokens, n_tokens, device=device)
                for token in range(n_tokens):

                    def zero(_module, _args, output, token=token):
                        output = output.clone()
                        output[:, token] = 0
                        return output

                    handle = value.register_forward_hook(zero)
                    if whole_model:
                        zeroed = model(**inputs, output_hidden_states=True).hidden_states[layer + 1]
                    else:
                        zeroed = module(hidden[layer])
                        zeroed = zeroed[0] if isinstance(zeroed, tuple) else zeroed
                    handle.remove()
                    scores[:, token] = 1 - F.cosine_similarity(zeroed[0], hidden[layer + 1][0], dim=-1)
                scores /= scores.sum(-1, keepdim=True)
    _synchronized(encoder)


def best_of(runs: int, function: Callable, *args) -> float:
    """The least seconds of `runs` calls (the least disturbed by other work on the machine)."""
    seconds = []
    for _ in range(runs):
        started = time.perf_counter()
        function(*args)
        seconds.append(time.perf_counter() - started)
    return min(seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", type=int, default=32)
    parser.add_argument("--loop-examples", type=int, default=2)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--corpus", default="wiki_segments", choices=sorted(CORPORA))
    parser.add_argument("--model", default=DEFAULT_MODEL)
    args = parser.parse_args()
    spec = CORPORA[args.corpus]
    encoder = load_encoder(args.model, resolve(compute_device(), compute_dtype()))
    tokens = encode_corpus(spec.read(data_dir()), encoder.tokenizer, spec.max_len, args.examples, spec.seed).tokens
    first = tokens["example_id"].unique().sort()[: args.loop_examples]
    loop_tokens = tokens.filter(pl.col("example_id").is_in(first.implode()))
    print(
        f"model {args.model}, corpus {args.corpus}, {tokens['example_id'].n_unique()} examples, {tokens.height} "
        f"tokens, {encoder.compute}, {torch.get_num_threads()} threads",
        flush=True,
    )
    bare_forward(encoder, tokens)  # warm-up
    bare = best_of(args.runs, bare_forward, encoder, tokens)
    print(f"{'bare forward':>14}: {bare:8.3f} s", flush=True)
    for weighting in WEIGHTINGS:
        seconds = best_of(args.runs, weighting_maps, encoder, tokens, weighting)
        print(f"{weighting:>14}: {seconds:8.3f} s  {seconds / bare:7.2f}x the bare forward", flush=True)
    batched = best_of(args.runs, weighting_maps, encoder, loop_tokens, "value_zeroing")
    print(
        f"value zeroing on {loop_tokens['example_id'].n_unique()} examples ({loop_tokens.height} tokens): "
        f"batched {batched:.3f} s",
        flush=True,
    )
    for whole_model, label, target in ((True, "forward", " (target >= 20x)"), (False, "layer call", "")):
        loop = best_of(1, zeroing_loop, encoder, loop_tokens, whole_model)
        print(f"  one zeroing per {label}: {loop:.3f} s, batched {loop / batched:.1f}x as fast{target}", flush=True)


if __name__ == "__main__":
    main()
