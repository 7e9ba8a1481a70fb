"""Input-contribution norms of the examples an HTA run has finished, saved on disk as it goes, so a
killed run resumes where it was: exact HTA takes a minute or more per example on a CPU, and a corpus
hours. Each file holds one example's norms under a digest of everything they depend on (the model's
weights, the example's inputs, the method and its probes' seed): a file is only reused for the same
computation."""

import hashlib
import os
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import PreTrainedModel

from dagster_project.compute.pascual.hta import HtaMethod
from dagster_project.settings import models_cache_dir

# Values taken from the start of every parameter: enough to tell apart two checkpoints, or two random
# initializations, of the same architecture without hashing the whole model per example.
FINGERPRINT_VALUES = 64


@dataclass(frozen=True)
class SavedContributions:
    """One HTA run's folder of saved input-contribution norms, one file per computed example, for
    the model whose weights `fingerprint` stands for (model_fingerprint)."""

    folder: Path
    fingerprint: str

    @classmethod
    def of(cls, folder: Path, model: PreTrainedModel) -> "SavedContributions":
        """The saved contributions in `folder` for `model`'s weights (their fingerprint taken once, here)."""
        return cls(folder, model_fingerprint(model))

    def norms(
        self,
        inputs: Mapping[str, torch.Tensor],
        method: HtaMethod,
        seed: int,
        compute: Callable[[], torch.Tensor],
    ) -> torch.Tensor:
        """The example's norms as saved by the same computation, else `compute()`'s, saved whole or not
        at all (a temporary file renamed into place, so a kill while saving leaves no partial file)."""
        path = self.folder / f"{self._digest(inputs, method, seed)}.pt"
        if path.is_file():
            return torch.load(path, map_location=inputs["input_ids"].device, weights_only=True)
        norms = compute()
        self.folder.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".partial")
        torch.save(norms.cpu(), partial)
        os.replace(partial, path)
        return norms

    def count(self) -> int:
        """Examples saved so far (by this run or by a killed one)."""
        return len(list(self.folder.glob("*.pt"))) if self.folder.is_dir() else 0

    def remove(self) -> None:
        """Once the run's facts are written, nothing is left to resume."""
        shutil.rmtree(self.folder, ignore_errors=True)

    def _digest(self, inputs: Mapping[str, torch.Tensor], method: HtaMethod, seed: int) -> str:
        digest = hashlib.sha256(f"{self.fingerprint}|{method}|{seed}".encode())
        for name in sorted(inputs):
            digest.update(name.encode())
            digest.update(inputs[name].cpu().numpy().tobytes())
        return digest.hexdigest()[:32]


def hta_state_dir() -> Path:
    """Where HTA runs keep the norms they resume from: beside the models cache's folders."""
    return models_cache_dir() / "hta_state"


def model_fingerprint(model: PreTrainedModel) -> str:
    """A digest of the first values of every weight, taken once per run (on a GPU, each weight's
    values cross to the host)."""
    digest = hashlib.sha256()
    with torch.no_grad():
        for parameter in model.parameters():
            digest.update(parameter.detach().flatten()[:FINGERPRINT_VALUES].float().cpu().numpy().tobytes())
    return digest.hexdigest()
