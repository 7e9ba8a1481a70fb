"""Faithfulness of the weightings of the maps (Modarressi et al. 2022, GlobEnc §5; docs/methods.md §3.9): per
example, the Spearman correlation between a weighting's attribution of the [CLS] token's last-layer
representation to the input tokens and the gradient x input saliency of a fine-tuned classifier's prediction.

- saliency_j = ||(d z_c / d e_j) * e_j||_2, z_c the logit of the predicted class and e_j token j's word
  embedding (the embedding layer's lookup, before the position and segment embeddings are added);
- attribution_j: the [CLS] row of the weighting's last-layer map, heads averaged, in each of
  compute/weightings.py's AGGREGATIONS: `per_layer`, the last layer's own map (GlobEnc's local setting);
  `rolled_out`, the maps of every layer multiplied through (GlobEnc's global setting, in which it reports
  W, N, attention rollout and N_Enc against the saliency): rollout, globenc and alti as their methods
  roll out, attention, norm and value zeroing by the plain product of their head-averaged maps;
- the Spearman correlation over the example's real tokens, [CLS] and [SEP] included as in GlobEnc's
  evaluation; tied values share their mean rank. An example whose attributions or saliencies are all
  equal has no correlation (null).

One forward of the classifier per batch serves both: its attentions and captured layer states give the
maps (compute/weightings.py), the gradient of the predicted logits w.r.t. the captured word embeddings the
saliency. Each example's logit is its own, so its gradient does not depend on its batch.
"""

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import polars as pl
import torch
from transformers import PreTrainedModel

from dagster_project.compute.batching import Batch, length_batches
from dagster_project.compute.clark.gradients import CLASSIFICATION, LossModel
from dagster_project.compute.devices import float32_maps
from dagster_project.compute.weightings import AGGREGATIONS, ModelWeightings, aggregated_maps, captured_layers

ROW_SCHEMA = {
    "example_id": pl.Int32,
    "weighting": pl.String,
    "aggregation": pl.String,
    "spearman": pl.Float64,
    "n_tokens": pl.Int16,
    "predicted_label": pl.Int16,
}


@dataclass(frozen=True)
class SaliencyMaps:
    """One batch's predicted classes (B,), gradient x input saliencies (B, T) and the weightings' [CLS]
    attributions of the last layer (B, A, W, T), A in AGGREGATIONS order, W in the order of the pass's
    weightings; float32."""

    predicted: torch.Tensor
    saliency: torch.Tensor
    attributions: torch.Tensor


def gradient_x_input(model: PreTrainedModel, inputs: dict[str, torch.Tensor]) -> tuple[torch.Tensor, tuple]:
    """||(d z_c / d e_j) * e_j||_2 of every (example, token), z_c the example's predicted logit and e_j the
    word embedding of its token j: (B, T) float32, with the forward's output (its logits and attentions).
    Word embeddings are captured by a hook on the model's input embeddings; the model's parameters get no
    gradients."""
    captured: list[torch.Tensor] = []
    handle = model.get_input_embeddings().register_forward_hook(lambda _module, _args, output: captured.append(output))
    try:
        output = model(**inputs, output_attentions=True)
    finally:
        handle.remove()
    (embeddings,) = captured
    predicted = output.logits.argmax(-1)
    (gradient,) = torch.autograd.grad(output.logits.gather(1, predicted[:, None]).sum(), embeddings)
    return (gradient * embeddings).float().norm(dim=-1).detach(), output


def cls_attributions(maps: torch.Tensor, cls_positions: torch.Tensor) -> torch.Tensor:
    """The [CLS] row of the last layer of aggregated maps (B, A, W, L, T, T) (weightings.aggregated_maps),
    given each example's [CLS] position (B,): (B, A, W, T)."""
    last = maps[:, :, :, -1]  # (B, A, W, T, T)
    rows = cls_positions[:, None, None, None, None].expand(-1, *last.shape[1:3], 1, last.shape[-1])
    return last.gather(3, rows).squeeze(3)


def saliency_maps(loss_model: LossModel, batch: Batch, chosen: ModelWeightings) -> SaliencyMaps:
    """The predicted classes, saliencies and [CLS] attributions of one batch (module docstring)."""
    model = loss_model.model
    with captured_layers(model, with_norms=chosen.needs_norms) as captured:
        saliency, output = gradient_x_input(model, batch.inputs)
        states = captured.take()
    with torch.no_grad():
        attn = float32_maps(output.attentions).detach()
        maps = aggregated_maps(chosen.maps(attn, batch.masks.valid, states))
        attributions = cls_attributions(maps, batch.masks.cls.to(torch.int64).argmax(-1))
    return SaliencyMaps(output.logits.argmax(-1).detach(), saliency, attributions)


def spearman_rows(attributions: np.ndarray, saliency: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """Spearman's rho of each attribution row against its example's saliency over its real tokens: (B, ...)
    from (B, ..., T), (B, T) and the real-token mask (B, T); NaN where either side is constant."""
    # imported here: scipy.stats takes 0.3 s to import, which every run would pay for this one pass
    from scipy.stats import rankdata

    inner = (slice(None), *(None,) * (attributions.ndim - 2))  # the example axis, then one per row axis
    ranks = rankdata(np.where(valid[inner], attributions, np.nan), axis=-1, nan_policy="omit")
    reference = rankdata(np.where(valid, saliency, np.nan), axis=-1, nan_policy="omit")[inner]
    ranks = ranks - np.nanmean(ranks, axis=-1, keepdims=True)
    reference = reference - np.nanmean(reference, axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.nansum(ranks * reference, -1) / np.sqrt(np.nansum(ranks**2, -1) * np.nansum(reference**2, -1))


@dataclass(frozen=True)
class Faithfulness:
    rows: pl.DataFrame  # ROW_SCHEMA: one row per (example, weighting, aggregation)
    n_examples: int
    seconds: float


def weighting_faithfulness(
    loss_model: LossModel,
    tokens: pl.DataFrame,
    weightings: list[str] | tuple[str, ...],
    batch_tokens: int | None = None,
    progress: Callable[[int, int, float], None] | None = None,
) -> Faithfulness:
    """Per (example, weighting, aggregation) the Spearman correlation of the [CLS] attribution and the saliency
    of a single-label classifier's prediction (module docstring), over the examples of `tokens` (the warehouse
    `tokens` table's columns). `batch_tokens` defaults to the backward budget of the model's device."""
    if loss_model.loss_name != CLASSIFICATION:
        raise ValueError(
            f"weighting faithfulness explains a classifier's predicted class; this model's head is "
            f"{loss_model.loss_name}. Use a checkpoint fine-tuned on a classification task (e.g. finetuned_sst2's)."
        )
    chosen = ModelWeightings.of(loss_model.model, weightings)
    weightings = chosen.weightings
    budget = batch_tokens or loss_model.compute.batch_tokens(backward=True)
    started, done, total = time.perf_counter(), 0, tokens["example_id"].n_unique()
    frames = []
    for batch in length_batches(tokens, loss_model.pad_token_id, budget, loss_model.takes_token_types):
        batch = batch.to(loss_model.compute.device)
        found = saliency_maps(loss_model, batch, chosen)
        valid = batch.masks.valid.cpu().numpy()
        rho = spearman_rows(found.attributions.cpu().numpy(), found.saliency.cpu().numpy(), valid)  # (B, A, W)
        n_batch, per_example = len(batch.example_ids), rho[0].size
        frames.append(
            pl.DataFrame(
                {
                    "example_id": np.repeat(batch.example_ids.cpu().numpy(), per_example),
                    "weighting": np.tile(np.asarray(weightings), n_batch * len(AGGREGATIONS)),
                    "aggregation": np.tile(np.repeat(np.asarray(AGGREGATIONS), len(weightings)), n_batch),
                    "spearman": rho.reshape(-1),
                    "n_tokens": np.repeat(valid.sum(-1), per_example),
                    "predicted_label": np.repeat(found.predicted.cpu().numpy(), per_example),
                }
            )
            .cast(ROW_SCHEMA)
            .with_columns(pl.col("spearman").fill_nan(None))
        )
        done += n_batch
        if progress:
            progress(done, total, time.perf_counter() - started)
    rows = pl.concat(frames) if frames else pl.DataFrame(schema=ROW_SCHEMA)
    return Faithfulness(rows, done, time.perf_counter() - started)
