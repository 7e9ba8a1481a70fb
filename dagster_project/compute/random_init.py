"""The random-weights control's checkpoint (compute/controls.py names it): the base model's architecture
and tokenizer with transformers' default initialisation under a seed, saved once as a checkpoint folder
in the models cache, so every step that loads it (the passes, the gradient pass, fine-tuning) sees the
same weights.
"""

import hashlib
import json
import os
import shutil
from importlib import metadata
from pathlib import Path

import torch
import transformers
from filelock import FileLock
from transformers import AutoConfig, AutoModel, AutoTokenizer, PretrainedConfig, PreTrainedModel

from dagster_project.compute.controls import RANDOM_INIT, RandomInit
from dagster_project.settings import models_cache_dir

RECORD = "random_init.json"  # in the checkpoint folder: what it was drawn from, and its weights' digest


def _architecture(config: PretrainedConfig) -> type[PreTrainedModel] | None:
    """The model class the base checkpoint was saved as (config.architectures: e.g. BertForMaskedLM, so
    the control keeps its masked-LM head), or None where transformers has no such class."""
    names = getattr(config, "architectures", None) or []
    found = getattr(transformers, names[0], None) if names else None
    return found if isinstance(found, type) and issubclass(found, PreTrainedModel) else None


def _random_model(config: PretrainedConfig, seed: int) -> PreTrainedModel:
    """The base's architecture with transformers' default initialisation, drawn on the CPU in float32
    under `seed` without touching the process's random state."""
    config.dtype = torch.float32
    architecture = _architecture(config)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return architecture(config) if architecture else AutoModel.from_config(config)


def _file_digest(path: Path) -> str:
    with path.open("rb") as file:
        return hashlib.file_digest(file, "sha1").hexdigest()


def _save(control: RandomInit, base_path: str, base_revision: str, folder: Path) -> None:
    """Write the control's checkpoint into `folder` (weights, config, the base's tokenizer, RECORD)."""
    config = AutoConfig.from_pretrained(base_path, cache_dir=models_cache_dir())
    _random_model(config, control.seed).save_pretrained(folder)
    AutoTokenizer.from_pretrained(base_path, cache_dir=models_cache_dir()).save_pretrained(folder)
    weights = sorted(folder.glob("*.safetensors"))
    record = {
        "base": control.base,
        "base_path": base_path,
        "base_revision": base_revision,
        "seed": control.seed,
        "weights_sha1": hashlib.sha1("".join(_file_digest(file) for file in weights).encode()).hexdigest(),
        "torch": torch.__version__,
        "transformers": metadata.version("transformers"),
    }
    (folder / RECORD).write_text(json.dumps(record, indent=2, sort_keys=True))


def random_init_checkpoint(control: RandomInit, base_key: str, base_path: str, base_revision: str) -> tuple[str, str]:
    """The folder of the control's checkpoint and its revision (`random-init:seed=<n>:<weights digest>`),
    from the base model's partition key, folder (or hub id) and revision; saved on first use as
    models_cache/random-init/<base key>-seed-<n>-<hash of the base's revision>, so a changed base gets a
    folder of its own. Written beside it and renamed into place under a file lock: a second process
    waits and re-uses it, and a killed save leaves only its `.partial` folder, which the next save
    replaces. Raises what transformers raises when the base's config or tokenizer do not load."""
    revision_hash = hashlib.sha1(base_revision.encode()).hexdigest()[:8]
    folder = models_cache_dir() / RANDOM_INIT / f"{base_key}-seed-{control.seed}-{revision_hash}"
    if not folder.is_dir():
        folder.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(folder.parent / f".{folder.name}.lock"):
            if not folder.is_dir():
                partial = folder.with_name(f"{folder.name}.partial")
                shutil.rmtree(partial, ignore_errors=True)
                _save(control, base_path, base_revision, partial)
                os.rename(partial, folder)
    record = json.loads((folder / RECORD).read_text())
    return str(folder.resolve()), f"{RANDOM_INIT}:seed={control.seed}:{record['weights_sha1'][:12]}"
