"""Agreement of the weightings of the maps with HTA (Modarressi et al. 2022, GlobEnc; Pascual et al. 2021;
docs/methods.md §3.9): per example, layer, weighting and aggregation, the mean over query rows of the Spearman
correlation between the weighting's map at that layer and Pascual's input contribution at that layer.

- the weighting's map at layer l, in each of compute/weightings.py's AGGREGATIONS: `per_layer`, the layer's
  own map, heads averaged (what GlobEnc's reference code correlates with HTA, and its 0.84-0.96 on
  BERT-base); `rolled_out`, the maps of layers 1..l multiplied through (an input attribution like HTA
  itself): rollout, globenc and alti as their methods roll out, attention, norm and value zeroing by the
  plain product of their head-averaged maps.
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
from dagster_project.compute.weightings import AGGREGATIONS, LayerStates, ModelWeightings, aggregated_maps


def layer_contributions(norms: torch.Tensor) -> torch.Tensor:
    """HTA's input contribution per layer, every head at once: (L, n, n) rows summing to 1 from the
    per-head norms ||d o^h_j / d e0_i||_F (L, H, n, n) of compute/pascual/hta.input_norms."""
    return normalize_rows(norms.pow(2).sum(1).sqrt())


def agreement_columns(
    attributions: torch.Tensor, contributions: torch.Tensor, weightings: tuple[str, ...], example_id: int
) -> dict[str, np.ndarray]:
    """One example's rows (sql/schema/hta_agreement.sql): per (aggregation, layer, weighting) the mean row
    Spearman correlation of its maps (A, W, L, n, n), A in AGGREGATIONS order, with the layer's contributions
    (L, n, n), and the rows with a correlation; flat columns, layers 1-based."""
    _, spearman, n_rows = row_correlations(attributions, contributions.expand_as(attributions))
    _, n_weightings, n_layers = spearman.shape
    return {
        "example_id": np.full(spearman.numel(), example_id, dtype=np.int32),
        "aggregation": np.repeat(np.asarray(AGGREGATIONS), n_weightings * n_layers),
        "layer": np.tile(np.arange(1, n_layers + 1, dtype=np.int16), len(AGGREGATIONS) * n_weightings),
        "weighting": np.tile(np.repeat(np.asarray(weightings), n_layers), len(AGGREGATIONS)),
        "spearman": spearman.reshape(-1).cpu().numpy(),
        "n_rows": n_rows.reshape(-1).to(torch.int16).cpu().numpy(),
    }


def example_attributions(chosen: ModelWeightings, attn: torch.Tensor, states: LayerStates) -> torch.Tensor:
    """One unpadded example's maps in every aggregation (A, W, L, n, n) from its attention (1, L, H, n, n)
    and the layer states captured in the same forward."""
    valid = torch.ones(attn.shape[0], attn.shape[-1], dtype=torch.bool, device=attn.device)
    return aggregated_maps(chosen.maps(attn, valid, states))[0]
