"""The models registry the user edits: `models.toml` plus drop folders of local checkpoints.

Pure: reads files and returns entries and per-entry problems; the sensor (sensors.py) does
the registering. A malformed file raises RegistryError (with its line); a bad entry is
returned as a problem and never stops the other entries.
"""

import json
import os
import tomllib
from collections.abc import Collection
from dataclasses import dataclass, replace
from pathlib import Path

from dagster_project import settings
from dagster_project.compute.controls import parse_random_init
from dagster_project.corpora import XNLI_LANGUAGES

ENTRY_KEYS = frozenset({"source", "analyses", "corpora", "enabled", "language"})
DROP_FOLDERS = ("drop", "finetuned")  # under the models cache; finetuned/ is where the pipeline saves checkpoints
# A checkpoint folder's own entry: its recipe.json (finetuned_<task> writes one) may name the
# `analyses` and `corpora` it is analysed on, e.g. a fine-tuned model only on its task's corpus.
CHECKPOINT_RECIPE = "recipe.json"


class RegistryError(ValueError):
    """The registry file itself cannot be read."""


@dataclass(frozen=True)
class RegistryEntry:
    source: str  # hub id, the absolute path of a local checkpoint folder, or random-init:<either>
    origin: str  # where the entry came from, for messages
    analyses: tuple[str, ...] | None = None  # None: the default analyses
    corpora: tuple[str, ...] | None = None  # None: the default corpora whose files are present
    enabled: bool = True
    # the XNLI language (of XNLI_LANGUAGES) the model stands for in Pascual Fig. 4, stored as
    # models.language; None: none (a language stored earlier is kept)
    language: str | None = None


@dataclass(frozen=True)
class RegistryProblem:
    origin: str
    reason: str

    def __str__(self) -> str:
        return f"{self.origin}: {self.reason}"


@dataclass(frozen=True)
class RegistryScan:
    entries: tuple[RegistryEntry, ...]
    problems: tuple[RegistryProblem, ...]


def registry_path() -> Path:
    """The registry file (ATTN_MODELS_REGISTRY, default models.toml in the home folder)."""
    return Path(os.environ.get("ATTN_MODELS_REGISTRY") or settings.home() / "models.toml").expanduser().resolve()


def drop_folders() -> list[Path]:
    return [settings.models_cache_dir() / name for name in DROP_FOLDERS]


def _names(raw: dict, key: str, known: Collection[str]) -> tuple[str, ...] | None:
    if key not in raw:
        return None
    value = raw[key]
    if not isinstance(value, list) or not value or not all(isinstance(item, str) for item in value):
        raise ValueError(f"'{key}' must be a non-empty list of names, got {value!r}")
    unknown = [name for name in value if name not in known]
    if unknown:
        raise ValueError(f"unknown {key} {unknown}; choose from {sorted(known)}")
    return tuple(value)


def _located(source: str, base: Path) -> str:
    """`source` with a relative folder made absolute against `base` (the registry file's folder),
    also after a random-init control's prefix. Raises ValueError for a malformed control."""
    control = parse_random_init(source)
    written = control.base if control else source
    local = (base / written).expanduser()
    located = str(local.resolve()) if local.exists() else written.strip()
    return replace(control, base=located).source if control else located


def _entry(raw: object, origin: str, base: Path, analyses: Collection[str], corpora: Collection[str]) -> RegistryEntry:
    if not isinstance(raw, dict):
        raise ValueError(f"expected a table with a 'source', got {raw!r}")
    extra = set(raw) - ENTRY_KEYS
    if extra:
        raise ValueError(f"unknown keys {sorted(extra)}; allowed: {sorted(ENTRY_KEYS)}")
    source = raw.get("source")
    if not isinstance(source, str) or not source.strip():
        raise ValueError("'source' (a hub id or a checkpoint folder) is missing or empty")
    enabled = raw.get("enabled", True)
    if not isinstance(enabled, bool):
        raise ValueError(f"'enabled' must be true or false, got {enabled!r}")
    language = raw.get("language")
    if language is not None and language not in XNLI_LANGUAGES:
        raise ValueError(
            f"'language' must be one of the XNLI languages {list(XNLI_LANGUAGES)} "
            f"(corpora {', '.join(f'xnli_{code}' for code in XNLI_LANGUAGES)}), got {language!r}"
        )
    return RegistryEntry(
        source=_located(source, base),
        origin=origin,
        analyses=_names(raw, "analyses", analyses),
        corpora=_names(raw, "corpora", corpora),
        enabled=enabled,
        language=language,
    )


def read_registry(path: Path, analyses: Collection[str], corpora: Collection[str]) -> RegistryScan:
    """Entries of a registry file: `[[model]]` tables with `source` and optional `analyses`,
    `corpora`, `enabled`, `language`. A missing file is an empty registry."""
    if not path.is_file():
        return RegistryScan((), ())
    try:
        document = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as error:
        raise RegistryError(
            f"{path} is not valid TOML: {error}. Fix that line; every entry is a [[model]] table."
        ) from error
    extra = set(document) - {"model"}
    if extra:
        raise RegistryError(f"{path}: unknown top-level keys {sorted(extra)}; list models as [[model]] tables.")
    models = document.get("model", [])
    if not isinstance(models, list):
        raise RegistryError(f"{path}: 'model' must be an array of tables ([[model]]), got {type(models).__name__}.")
    entries, problems = [], []
    for number, raw in enumerate(models, start=1):
        origin = f"{path.name} [[model]] #{number}" + (
            f" ({raw['source']})" if isinstance(raw, dict) and "source" in raw else ""
        )
        try:
            entries.append(_entry(raw, origin, path.parent, analyses, corpora))
        except ValueError as error:
            problems.append(RegistryProblem(origin, str(error)))
    return RegistryScan(tuple(entries), tuple(problems))


def checkpoint_folders(folder: Path) -> list[Path]:
    """Subfolders holding a config.json: local checkpoints dropped (or fine-tuned) there."""
    if not folder.is_dir():
        return []
    return sorted(path for path in folder.iterdir() if (path / "config.json").is_file())


def checkpoint_entry(checkpoint: Path, analyses: Collection[str], corpora: Collection[str]) -> RegistryEntry:
    """The entry of a checkpoint folder: the default analyses and corpora, or those its
    recipe.json names (a fine-tuned checkpoint: its own task's validation corpus, as Kovaleva
    measures fine-tuned models). Raises ValueError for an unreadable recipe or unknown names."""
    origin = f"{checkpoint.parent.name}/{checkpoint.name}"
    recipe_path = checkpoint / CHECKPOINT_RECIPE
    recipe = {}
    if recipe_path.is_file():
        try:
            recipe = json.loads(recipe_path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise ValueError(f"{recipe_path} is not valid JSON ({error}); fix or delete it") from error
        if not isinstance(recipe, dict):
            raise ValueError(f"{recipe_path} must hold a JSON object, got {type(recipe).__name__}")
    try:
        chosen_analyses, chosen_corpora = _names(recipe, "analyses", analyses), _names(recipe, "corpora", corpora)
    except ValueError as error:
        raise ValueError(f"{recipe_path}: {error}") from error
    return RegistryEntry(str(checkpoint.resolve()), origin, analyses=chosen_analyses, corpora=chosen_corpora)


def scan_registry(path: Path, folders: list[Path], analyses: Collection[str], corpora: Collection[str]) -> RegistryScan:
    """The registry file's entries, then one entry per checkpoint folder in `folders`
    (checkpoint_entry), skipping sources listed twice (the first one wins)."""
    listed = read_registry(path, analyses, corpora)
    problems = list(listed.problems)
    dropped = []
    for checkpoint in (checkpoint for folder in folders for checkpoint in checkpoint_folders(folder)):
        try:
            dropped.append(checkpoint_entry(checkpoint, analyses, corpora))
        except ValueError as error:
            problems.append(RegistryProblem(f"{checkpoint.parent.name}/{checkpoint.name}", str(error)))
    entries, first_origin = [], {}
    for entry in (*listed.entries, *dropped):
        if entry.source in first_origin:
            problems.append(
                RegistryProblem(entry.origin, f"'{entry.source}' is already listed by {first_origin[entry.source]}")
            )
            continue
        first_origin[entry.source] = entry.origin
        entries.append(entry)
    return RegistryScan(tuple(entries), tuple(problems))
