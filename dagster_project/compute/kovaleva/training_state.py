"""Fine-tuning's training state, saved every few optimizer steps so a killed fine-tuning resumes where it
was (model, optimizer, schedule, the random number generators dropout draws from, the losses so far)."""

import logging
import os
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import PreTrainedModel

from dagster_project.settings import models_cache_dir

LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainingCheckpoints:
    """Where fine-tuning saves its training state every `every` optimizer steps (model, optimizer,
    schedule, random number generators, step) and after the last, to resume from after a kill."""

    folder: Path
    every: int

    @property
    def path(self) -> Path:
        """The file in `folder` that holds the training state."""
        return self.folder / "training_state.pt"

    def save(
        self,
        identity: dict,
        model: PreTrainedModel,
        optimizer: torch.optim.Optimizer,
        schedule: torch.optim.lr_scheduler.LRScheduler,
        losses: list[float],
        micro: int,
    ) -> None:
        """The training state after the last of `losses`' steps, written whole or not at all (a temporary
        file renamed over the last one), so a kill while saving leaves the previous state."""
        self.folder.mkdir(parents=True, exist_ok=True)
        state = {
            "identity": identity,
            "losses": losses,
            "micro_batch": micro,
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "schedule": schedule.state_dict(),
            "generators": generator_state(model.device),
        }
        partial = self.path.with_suffix(".partial")
        torch.save(state, partial)
        os.replace(partial, self.path)

    def saved(self, identity: dict) -> dict | None:
        """The saved training state to resume from, or None: none saved, or saved by another recipe or
        data (then logged, and overwritten by this run's first save)."""
        if not self.path.is_file():
            return None
        state = torch.load(self.path, map_location="cpu", weights_only=True)
        if state["identity"] != identity:
            LOG.warning(
                f"{self.path} was saved by another fine-tuning run ({state['identity']}, not {identity}); "
                "starting afresh"
            )
            return None
        return state


def training_state_dir() -> Path:
    """Where fine-tuning keeps its training states to resume from: beside the models cache's folders."""
    return models_cache_dir() / "training_state"


def generator_state(device: torch.device) -> dict[str, torch.Tensor]:
    """The random number generators' states that dropout draws from: the CPU's and the model device's."""
    state = {"cpu": torch.get_rng_state()}
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    elif device.type == "mps":
        state["mps"] = torch.mps.get_rng_state()
    return state


def restore_generators(device: torch.device, state: dict[str, torch.Tensor]) -> None:
    """Put back the random number generators' states `generator_state` saved (the CPU's and the CUDA
    device's or MPS's), so dropout draws what it would have drawn without the kill."""
    torch.set_rng_state(state["cpu"])
    if "cuda" in state:
        torch.cuda.set_rng_state(state["cuda"], device)
    elif "mps" in state:
        torch.mps.set_rng_state(state["mps"])
