"""Agreement of the weightings of the maps with HTA (Modarressi et al. 2022, GlobEnc; Pascual et al. 2021;
docs/methods.md §3.9): per example, layer and weighting, the mean over query rows of the Spearman correlation
between the weighting's input attribution up to that layer and Pascual's input contribution at that layer.

- input attribution at layer l: the weighting's maps of layers 1..l aggregated as the method does. rollout,
  globenc and alti are products through the layers already (compute/weightings.py); attention and norm are
  rolled out as the plain product of their head-averaged maps (GlobEnc's rollout of W and N), value_zeroing
  as the plain product of its maps (Mohebbi et al. roll it out without adding the identity: the zeroing's
  distances already include the residual).
- HTA at layer l: per (query j, input token i), ||d o_j / d e0_i||_F over every head's context at once,
  sqrt(sum_h ||J^h_ji||_F^2), each row divided by its sum: how much input token i feeds token j's attention
  output at layer l, one map per layer like the weightings'.
- rows: every query row of the example, [CLS] and [SEP] included, each correlated over every key of the
  example, as GlobEnc's comparison with HTA does; the example's value is the mean over the rows with a
  correlation (a constant row has none), and the number of those rows is kept. Tied values share their
  mean rank.

The HTA pass (compute/pascual/hta_facts.py) computes it from the forward it already runs per example:
its attention maps and the layer states captured beside them give every weighting's maps.
"""

from dataclasses import dataclass

import numpy as np
import torch
from transformers import PreTrainedModel

from dagster_project.compute.pascual.hta import normalize_rows, row_correlations
from dagster_project.compute.weightings import (
    LAYER_DECOMPOSITIONS,
    EncoderLayerParts,
    LayerStates,
    check_weightings,
    encoder_layer_parts,
    output_grams,
    rolled_out,
    weighted_maps,
)

# the weightings whose per-layer maps are rolled out here, by the plain product through the layers
ROLLED_BY_PRODUCT = ("attention", "norm", "value_zeroing")


def input_attributions(maps: dict[str, torch.Tensor]) -> torch.Tensor:
    """Each weighting's input attribution at every layer: (B, W, L, T, T) from maps of (B, L, H or 1, T, T),
    W in the order of `maps` (module docstring: heads averaged, then ROLLED_BY_PRODUCT rolled out)."""
    attributions = []
    for name, weighted in maps.items():
        layer_maps = weighted.mean(2)
        attributions.append(rolled_out(layer_maps) if name in ROLLED_BY_PRODUCT else layer_maps)
    return torch.stack(attributions, dim=1)


def layer_contributions(norms: torch.Tensor) -> torch.Tensor:
    """HTA's input contribution per layer, every head at once: (L, n, n) rows summing to 1 from the
    per-head norms ||d o^h_j / d e0_i||_F (L, H, n, n) of compute/pascual/hta.input_norms."""
    return normalize_rows(norms.pow(2).sum(1).sqrt())


def agreement_columns(
    attributions: torch.Tensor, contributions: torch.Tensor, weightings: tuple[str, ...], example_id: int
) -> dict[str, np.ndarray]:
    """One example's rows (sql/schema/hta_agreement.sql): per (layer, weighting) the mean row Spearman
    correlation of its input attribution (W, L, n, n) with the layer's contributions (L, n, n), and the
    rows with a correlation; flat columns, layers 1-based."""
    _, spearman, n_rows = row_correlations(attributions, contributions.expand_as(attributions))
    n_weightings, n_layers = spearman.shape
    return {
        "example_id": np.full(n_weightings * n_layers, example_id, dtype=np.int32),
        "layer": np.tile(np.arange(1, n_layers + 1, dtype=np.int16), n_weightings),
        "weighting": np.repeat(np.asarray(weightings), n_layers),
        "spearman": spearman.reshape(-1).cpu().numpy(),
        "n_rows": n_rows.reshape(-1).to(torch.int16).cpu().numpy(),
    }


@dataclass(frozen=True)
class AttributionWeightings:
    """The weightings of the comparison (check_weightings' order) and what they read of the model besides a
    forward: the output projection's Gram matrices for norm, the encoder layer's parts for the layer
    decompositions."""

    weightings: tuple[str, ...]
    grams: torch.Tensor | None
    parts: EncoderLayerParts | None

    @classmethod
    def of(cls, model: PreTrainedModel, weightings: list[str] | tuple[str, ...]) -> "AttributionWeightings":
        """Those of `model`: an unknown weighting, or a layer decomposition of a family whose LayerNorms
        the layout does not name, is refused (ValueError) before any forward."""
        chosen = check_weightings(weightings)
        n_heads = model.config.num_attention_heads
        return cls(
            chosen,
            output_grams(model, n_heads) if "norm" in chosen else None,
            encoder_layer_parts(model, n_heads) if set(chosen) & set(LAYER_DECOMPOSITIONS) else None,
        )

    @property
    def needs_norms(self) -> bool:
        """Whether the forward must capture the LayerNorms' inputs and outputs (compute/weightings.captured_layers)."""
        return self.parts is not None

    def attributions(self, attn: torch.Tensor, states: LayerStates) -> torch.Tensor:
        """One unpadded example's input attributions (W, L, n, n) from its attention (1, L, H, n, n) and the
        layer states captured in the same forward."""
        valid = torch.ones(attn.shape[0], attn.shape[-1], dtype=torch.bool, device=attn.device)
        maps = weighted_maps(attn, self.weightings, valid, states, self.grams, self.parts).maps
        return input_attributions(maps)[0]
