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

import numpy as np
import torch

from dagster_project.compute.pascual.hta import normalize_rows, row_correlations
from dagster_project.compute.weightings import LayerStates, ModelWeightings, rolled_out

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


def example_attributions(chosen: ModelWeightings, attn: torch.Tensor, states: LayerStates) -> torch.Tensor:
    """One unpadded example's input attributions (W, L, n, n) from its attention (1, L, H, n, n) and the
    layer states captured in the same forward."""
    valid = torch.ones(attn.shape[0], attn.shape[-1], dtype=torch.bool, device=attn.device)
    return input_attributions(chosen.maps(attn, valid, states).maps)[0]
