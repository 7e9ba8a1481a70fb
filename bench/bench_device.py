"""The passes on this machine's device (CUDA, MPS or the CPU): the attention fact pass against the bare
forward it runs, and HTA seconds per example, for encoders of MiniLM's size (6 x 12 x 384) and
bert-base's (12 x 12 x 768), random weights drawn from their configs (they cost what trained ones do).

For every (size, forward dtype, corpus), in this process, on the same examples:
  bare eager   the forward pass the fact pass runs (eager attention), no attentions returned
  sdpa         the same weights with PyTorch's fused attention (what a plain inference would run)
  facts        compute.attention_pass.extract_attention_facts with the corpus's fact kinds:
               forward with attentions, every statistic, the fact frames ready to write
Ratios are throughputs against bare eager (facts / bare = 1 means the statistics cost nothing). A
separate timed pass splits the fact pass's time into forward, statistics on the device, copy to the
host and frame building (compute/pass_timings.py; that pass waits for the device between phases).
The corpora are xnli_en (max_len = the model's d_head, as the corpus asset sets it), wiki_segments
(head distances, Clark §6) and ud_ewt_test (relation hits; Kovaleva's verb -> subject pairs where
spaCy is installed, otherwise that kind is left out and the table says so).

HTA: one example of --hta-pieces pieces (default: 32 for MiniLM's size, 64 for bert-base's) cut from
a Wikipedia segment, float32 as HTA always runs; seconds of the whole per-example HTA
(hta_facts.example_maps: attention, previous-layer and input contributions) with exact input
contributions and with the run's default estimator.

The last two lines are `worst fact-pass ratio R` and `HTA exact s/example S`.
Imports only the compute layer and the corpora: it runs on a machine with torch, transformers, numpy,
polars and conllu (../shared/tools/gpu_bundle).

Usage: OMP_WAIT_POLICY=PASSIVE python -m bench.bench_device [--quick] [--sizes minilm bert-base]
       [--dtypes float32 bfloat16] [--examples N] [--repeats R] [--hta-examples N]
The device comes from ATTN_DEVICE (default auto). --quick: MiniLM's size, float32, 48 examples per
corpus, HTA on one 12-piece example (a few minutes on 2 CPU cores).
Targets (GPU): facts >= 0.5x bare eager for bert-base in bf16 and fp32 on all three corpora, >= 0.3x
for MiniLM; MiniLM exact HTA <= 0.5 s per 32-piece example, bert-base <= 10 s per 64-piece example.
CPU: wiki_segments >= 0.6x on 2 cores.
"""

import argparse
import importlib.util
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import torch
from transformers import AutoConfig, AutoModel, AutoTokenizer, PretrainedConfig

from dagster_project.compute.attention_facts import feature_pair_links
from dagster_project.compute.attention_pass import extract_attention_facts, pass_inputs
from dagster_project.compute.batching import length_batches
from dagster_project.compute.devices import ComputeDevice, dtype_name, resolve, synchronize
from dagster_project.compute.fact_kinds import SPACY_FEATURES, FactKind, corpus_fact_kinds
from dagster_project.compute.models import DEFAULT_MODEL, LoadedEncoder, inspect_model, load_encoder
from dagster_project.compute.pascual.hta import HtaMethod
from dagster_project.compute.pascual.hta_facts import DEFAULT_HTA_METHOD, example_maps
from dagster_project.compute.pass_timings import PHASES, PassTimings
from dagster_project.corpora import CORPORA, encode_corpus
from dagster_project.settings import compute_device, data_dir

CORPUS_NAMES = ("xnli_en", "wiki_segments", "ud_ewt_test")
SIZES = {"minilm": {}, "bert-base": {"hidden_size": 768, "num_hidden_layers": 12, "intermediate_size": 3072}}
HTA_PIECES = {"minilm": 32, "bert-base": 64}


@dataclass
class Row:
    size: str
    dtype: str
    corpus: str
    examples: int
    bare: float  # examples per second
    sdpa: float
    facts: float
    split: dict[str, float]

    @property
    def ratio(self) -> float:
        return self.facts / self.bare


def random_encoder(size: str, folder: Path, compute: ComputeDevice) -> LoadedEncoder:
    """An encoder of `size` with random weights (seed 0) and the default model's tokenizer."""
    source = inspect_model(DEFAULT_MODEL).resolved_path
    config: PretrainedConfig = AutoConfig.from_pretrained(source)
    for name, value in SIZES[size].items():
        setattr(config, name, value)
    torch.manual_seed(0)
    AutoModel.from_config(config).save_pretrained(folder)
    AutoTokenizer.from_pretrained(source).save_pretrained(folder)
    return load_encoder(str(folder), compute)


def sdpa_model(folder: Path, compute: ComputeDevice) -> torch.nn.Module:
    model = AutoModel.from_pretrained(folder, attn_implementation="sdpa", dtype=compute.dtype)
    return model.to(compute.device).eval()


def corpus_inputs(name: str, encoder: LoadedEncoder, examples: int) -> tuple[pl.DataFrame, dict, list[FactKind]]:
    """The corpus's tokens, the pass options its kinds need (words, feature links), and its kinds
    (spaCy's when spaCy is installed)."""
    spec = CORPORA[name]
    config = encoder.model.config
    max_len = config.hidden_size // config.num_attention_heads if spec.max_len_is_d_head else spec.max_len
    encoded = encode_corpus(spec.read(data_dir()), encoder.tokenizer, max_len, examples, spec.seed, spec.overlong)
    kinds = corpus_fact_kinds(spec)
    options: dict = {}
    if any(kind.needs for kind in kinds):
        options["words"] = encoded.words.select("example_id", "word_index", "piece_start", "piece_end")
    if any(SPACY_FEATURES in kind.needs for kind in kinds):
        if importlib.util.find_spec("spacy") is None:
            left_out = [kind.table for kind in kinds if SPACY_FEATURES in kind.needs]
            print(f"{name}: {', '.join(left_out)} left out (needs spaCy, which is not installed here)", flush=True)
            kinds = [kind for kind in kinds if SPACY_FEATURES not in kind.needs]
        else:
            from dagster_project.corpora.annotation import spacy_features

            features = spacy_features(encoded.examples, encoded.words)
            options["words"] = options["words"].join(features, on=["example_id", "word_index"], how="left")
            options["feature_links"] = feature_pair_links(options["words"])
    return encoded.tokens, options, kinds


def bare_seconds(model: torch.nn.Module, encoder: LoadedEncoder, tokens: pl.DataFrame) -> float:
    started = time.perf_counter()
    with torch.inference_mode():
        for batch in length_batches(
            tokens, encoder.tokenizer.pad_token_id or 0, encoder.compute.batch_tokens(), encoder.spec.takes_token_types
        ):
            model(**batch.to(encoder.compute.device).inputs, output_attentions=False)
    synchronize(encoder.compute.device)
    return time.perf_counter() - started


def fact_seconds(encoder: LoadedEncoder, tokens: pl.DataFrame, options: dict, kinds: list[FactKind]) -> float:
    started = time.perf_counter()
    extract_attention_facts(encoder, tokens, kinds, pass_inputs(encoder, tokens, **options))
    return time.perf_counter() - started


def measure_corpus(
    size: str, encoder: LoadedEncoder, sdpa: torch.nn.Module, corpus: str, examples: int, repeats: int
) -> Row:
    tokens, options, kinds = corpus_inputs(corpus, encoder, examples)
    n = tokens["example_id"].n_unique()
    bare_seconds(encoder.model, encoder, tokens)  # warm-up (kernels, allocator)
    fact_seconds(encoder, tokens, options, kinds)
    times: dict[str, list[float]] = {"bare": [], "sdpa": [], "facts": []}
    for _ in range(repeats):  # interleaved, so drift in the machine's load hits all alike; best of each
        times["bare"].append(bare_seconds(encoder.model, encoder, tokens))
        times["sdpa"].append(bare_seconds(sdpa, encoder, tokens))
        times["facts"].append(fact_seconds(encoder, tokens, options, kinds))
    timings = PassTimings(encoder.compute.device)
    extract_attention_facts(encoder, tokens, kinds, pass_inputs(encoder, tokens, **options), timings=timings)
    rate = {name: n / min(seconds) for name, seconds in times.items()}
    return Row(
        size, dtype_name(encoder.compute.dtype), corpus, n, rate["bare"], rate["sdpa"], rate["facts"], timings.shares()
    )


def hta_example(encoder: LoadedEncoder, pieces: int) -> dict[str, torch.Tensor]:
    """One example of exactly `pieces` pieces: the start of a long Wikipedia segment."""
    spec = CORPORA["wiki_segments"]
    encoded = encode_corpus(spec.read(data_dir()), encoder.tokenizer, 512, 64, spec.seed)
    longest = encoded.tokens.group_by("example_id").len().sort("len", "example_id", descending=True)["example_id"][0]
    ids = encoded.tokens.filter(pl.col("example_id") == longest).sort("position")["token_id"].to_list()
    ids = [*ids[: pieces - 1], encoder.tokenizer.sep_token_id]
    inputs = {"input_ids": torch.tensor([ids]), "attention_mask": torch.ones(1, len(ids), dtype=torch.int64)}
    if encoder.spec.takes_token_types:
        inputs["token_type_ids"] = torch.zeros(1, len(ids), dtype=torch.int64)
    return {name: value.to(encoder.compute.device) for name, value in inputs.items()}


def hta_seconds(encoder: LoadedEncoder, pieces: int, method: str, examples: int) -> float:
    inputs = hta_example(encoder, pieces)
    parsed = HtaMethod.parse(method)
    seconds = []
    for seed in range(examples):
        synchronize(encoder.compute.device)
        started = time.perf_counter()
        example_maps(encoder, inputs, parsed, seed)
        synchronize(encoder.compute.device)
        seconds.append(time.perf_counter() - started)
    return min(seconds)


PHASE_NAMES = ", ".join(PHASES)
HEADER = (
    f"{'size':<10} {'dtype':<9} {'corpus':<14} {'examples':>8} {'bare ex/s':>10} {'sdpa ex/s':>10} "
    f"{'facts ex/s':>10} {'facts/bare':>10}  split of the fact pass ({PHASE_NAMES})"
)


def row_line(row: Row) -> str:
    split = " ".join(f"{row.split[name]:.0%}" for name in PHASES)
    return (
        f"{row.size:<10} {row.dtype:<9} {row.corpus:<14} {row.examples:>8} {row.bare:>10.1f} {row.sdpa:>10.1f} "
        f"{row.facts:>10.1f} {row.ratio:>9.2f}x  {split}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--sizes", nargs="+", choices=sorted(SIZES))
    parser.add_argument("--dtypes", nargs="+", choices=("float32", "bfloat16"))
    parser.add_argument("--corpora", nargs="+", choices=CORPUS_NAMES, default=list(CORPUS_NAMES))
    parser.add_argument("--examples", type=int, help="per corpus (default: the corpus's size; --quick 48)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--hta-pieces", type=int, help="pieces of the HTA example (default by size; --quick 12)")
    parser.add_argument("--hta-examples", type=int, default=2, help="timed HTA runs per method (best is kept)")
    args = parser.parse_args()
    device = resolve(compute_device(), "float32").device
    sizes = args.sizes or (["minilm"] if args.quick else list(SIZES))
    on_cpu = device.type == "cpu"
    dtypes = args.dtypes or (["float32"] if args.quick or on_cpu else ["float32", "bfloat16"])
    examples = args.examples or (48 if args.quick else None)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else device.type
    print(f"device {device} ({name}), torch {torch.__version__}, {torch.get_num_threads()} threads", flush=True)
    print(HEADER, flush=True)
    rows: list[Row] = []
    hta: dict[str, tuple[int, float, float]] = {}
    with tempfile.TemporaryDirectory() as folder:
        for size in sizes:
            weights = Path(folder) / size
            for dtype in dtypes:
                compute = ComputeDevice(device, getattr(torch, dtype))
                encoder = random_encoder(size, weights, compute)
                sdpa = sdpa_model(weights, compute)
                for corpus in args.corpora:
                    rows.append(measure_corpus(size, encoder, sdpa, corpus, examples, args.repeats))
                    print(row_line(rows[-1]), flush=True)
                del encoder, sdpa
            pieces = args.hta_pieces or (12 if args.quick else HTA_PIECES[size])
            encoder = load_encoder(str(weights), ComputeDevice(device))
            exact = hta_seconds(encoder, pieces, "exact", 1 if args.quick else args.hta_examples)
            estimated = hta_seconds(encoder, pieces, DEFAULT_HTA_METHOD, args.hta_examples)
            hta[size] = (pieces, exact, estimated)
            print(
                f"HTA {size}, {pieces} pieces: exact {exact:.2f} s, {DEFAULT_HTA_METHOD} {estimated:.2f} s", flush=True
            )
    print(f"\n{HEADER}")
    print("\n".join(row_line(row) for row in rows))
    worst = min(rows, key=lambda row: row.ratio)
    print(f"worst fact-pass ratio {worst.ratio:.2f} ({worst.size} {worst.dtype} {worst.corpus})")
    exact_line = "; ".join(f"{seconds:.2f} ({size}, {pieces} pieces)" for size, (pieces, seconds, _) in hta.items())
    print(f"HTA exact s/example {exact_line}")


if __name__ == "__main__":
    main()
