"""Head clustering (Clark §6): pairwise Jensen-Shannon divergences between heads."""

import math

import numpy as np
import polars as pl
import pytest
import torch
from scipy.spatial.distance import jensenshannon, pdist, squareform

from dagster_project.compute.clark import head_clustering
from dagster_project.compute.clark.head_clustering import (
    QueryRows,
    classical_start,
    distance_matrix,
    distance_rows,
    embed_heads,
    head_js_divergence,
)


def _random_maps(
    lengths: list[int], layers: int, heads: int, width: int, seed: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random attention rows over each example's real keys; padded query rows hold junk that must be ignored."""
    generator = torch.Generator().manual_seed(seed)
    valid = torch.arange(width)[None, :] < torch.tensor(lengths)[:, None]
    logits = torch.randn(len(lengths), layers, heads, width, width, generator=generator) * 2
    logits = logits.masked_fill(~valid[:, None, None, None, :], float("-inf"))
    attn = logits.softmax(-1)
    attn = torch.where(valid[:, None, None, :, None], attn, torch.rand(attn.shape, generator=generator))
    return attn, valid


def _scipy_js_sums(attn: torch.Tensor, valid: torch.Tensor) -> np.ndarray:
    batch, layers, heads, _, _ = attn.shape
    flat = attn.double().reshape(batch, layers * heads, attn.shape[-2], attn.shape[-1]).numpy()
    expected = np.zeros((layers * heads, layers * heads))
    for example, query in zip(*np.nonzero(valid.numpy()), strict=True):
        for a in range(layers * heads):
            for b in range(layers * heads):
                # scipy returns the Jensen-Shannon distance: the square root of the divergence.
                expected[a, b] += jensenshannon(flat[example, a, query], flat[example, b, query]) ** 2
    return expected


def test_js_of_disjoint_one_hot_rows_is_log_two() -> None:
    attn = torch.tensor([[1.0, 0.0], [0.0, 1.0]]).reshape(1, 1, 2, 1, 2).expand(1, 1, 2, 2, 2).contiguous()
    valid = torch.tensor([[True, True]])
    distances = head_js_divergence(attn, valid)
    assert distances.dtype == torch.float64
    assert distances[0, 1].item() == pytest.approx(2 * math.log(2))  # two query rows, ln 2 each
    assert distances[1, 0].item() == pytest.approx(2 * math.log(2))
    assert distances.diagonal().tolist() == [0.0, 0.0]


@pytest.mark.parametrize("fused", [False, True], ids=["eager", "fused"])
def test_js_matches_scipy_with_padding(fused: bool) -> None:
    # 2 x 5 heads: blocks of FUSED_BLOCK_HEADS = 4 heads leave a block of 2 (one pair with itself)
    attn, valid = _random_maps([6, 4, 1], layers=2, heads=5, width=6, seed=0)
    distances = head_js_divergence(attn, valid, fused=fused)
    np.testing.assert_allclose(distances.numpy(), _scipy_js_sums(attn, valid), rtol=1e-5, atol=1e-6)
    assert torch.equal(distances, distances.T)


def test_fused_js_is_the_eager_loop_whatever_the_row_chunk() -> None:
    attn, valid = _random_maps([7, 5, 2], layers=3, heads=3, width=7, seed=4)
    eager = head_js_divergence(attn, valid, fused=False)
    torch.testing.assert_close(head_js_divergence(attn, valid, fused=True), eager, rtol=1e-6, atol=1e-7)
    # 2-row chunks: a chunk of 1 row would be a second compile (torch.compile specializes sizes of 1)
    two_rows = 2 * (3 * 3 - 1) * 7 * attn.element_size()
    torch.testing.assert_close(head_js_divergence(attn, valid, two_rows, fused=True), eager, rtol=1e-6, atol=1e-7)
    assert not head_clustering._FUSED_BLOCK_S_LOG_S.failed  # compiled here, not the fallback


def test_js_is_the_same_whatever_the_row_chunk() -> None:
    attn, valid = _random_maps([5, 3], layers=2, heads=2, width=5, seed=1)
    torch.testing.assert_close(head_js_divergence(attn, valid, chunk_bytes=1), head_js_divergence(attn, valid))


@pytest.mark.parametrize("fused", [False, True], ids=["eager", "fused"])
def test_query_rows_filled_layer_by_layer_match_scipy(fused: bool) -> None:
    """What the attention pass does: each layer's (B, H, T, T) maps as the forward finishes it, in a buffer
    left by a larger batch before."""
    attn, valid = _random_maps([5, 3, 2], layers=3, heads=2, width=5, seed=5)
    larger = QueryRows(torch.ones(4, 5, dtype=torch.bool), 3, 2, attn.dtype)
    rows = QueryRows(valid, 3, 2, attn.dtype, storage=larger.storage)
    assert rows.storage is larger.storage  # reused, not reallocated
    for layer in range(3):
        rows.add(layer, attn[:, layer])
    expected = _scipy_js_sums(attn, valid)
    np.testing.assert_allclose(rows.divergences(fused=fused).numpy(), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(rows.head_mass.numpy(), [10.0] * 6, rtol=1e-6)  # 10 real rows, each sums to 1
    torch.testing.assert_close(head_js_divergence(attn, valid, fused=fused), rows.divergences(fused=fused))


def test_query_rows_want_every_layer_and_the_batch_shape() -> None:
    attn, valid = _random_maps([3, 2], layers=2, heads=2, width=3, seed=6)
    rows = QueryRows(valid, 2, 2, attn.dtype)
    with pytest.raises(ValueError, match=r"layer maps must be \(B, H, T, T\) = \(2, 2, 3, 3\)"):
        rows.add(0, attn[:1, 0])
    rows.add(0, attn[:, 0])
    with pytest.raises(ValueError, match="1 layers added of 2"):
        rows.divergences()
    # a storage too small, or of another dtype, is not used
    assert QueryRows(valid, 2, 2, attn.dtype, storage=torch.empty(3)).storage.numel() == 5 * 4 * 3
    assert QueryRows(valid, 2, 2, attn.dtype, storage=torch.empty(100, dtype=torch.float64)).storage.dtype == attn.dtype


def test_identical_heads_are_at_distance_zero() -> None:
    attn, valid = _random_maps([4, 2], layers=2, heads=2, width=4, seed=2)
    attn[:, 1, 0] = attn[:, 0, 1]  # layer 2 head 1 copies layer 1 head 2
    distances = head_js_divergence(attn, valid)
    assert distances[1, 2].item() == pytest.approx(0.0, abs=1e-6)
    assert distances[0, 2].item() > 0.1


def test_js_rejects_a_mask_of_the_wrong_shape() -> None:
    attn, valid = _random_maps([3], layers=1, heads=2, width=3, seed=3)
    with pytest.raises(ValueError, match=r"valid must be a bool \(B, T\)"):
        head_js_divergence(attn, valid[:, :2])


def test_distance_rows_number_heads_from_one_per_unordered_pair() -> None:
    js_sums = torch.tensor([[0.0, 1.0, 2.0], [1.0, 0.0, 3.0], [2.0, 3.0, 0.0]], dtype=torch.float64)
    rows = distance_rows(js_sums, tokens=10, heads=2)  # heads 0, 1, 2 = (1,1), (1,2), (2,1)
    assert rows.rows() == [(1, 1, 1, 2, 1.0, 10), (1, 1, 2, 1, 2.0, 10), (1, 2, 2, 1, 3.0, 10)]


def test_distance_matrix_is_the_mean_per_token_in_either_order() -> None:
    rows = pl.DataFrame(
        {
            "layer_a": [1, 2, 2, 1],
            "head_a": [1, 1, 1, 2],
            "layer_b": [1, 1, 1, 2],
            "head_b": [2, 1, 2, 1],
            "js_sum": [4.0, 8.0, 6.0, 6.0],
            "tokens": [8] * 4,
        }
    )  # (2,1)-(1,2) appears in both orders
    distances = distance_matrix(rows)
    assert distances.heads.rows() == [(1, 1), (1, 2), (2, 1)]
    np.testing.assert_array_equal(distances.js_mean, [[0.0, 0.5, 1.0], [0.5, 0.0, 0.75], [1.0, 0.75, 0.0]])


def test_distance_matrix_rejects_missing_pairs() -> None:
    rows = pl.DataFrame(
        {
            "layer_a": [1, 1],
            "head_a": [1, 1],
            "layer_b": [1, 2],
            "head_b": [2, 1],
            "js_sum": [1.0, 1.0],
            "tokens": [1, 1],
        }
    )
    with pytest.raises(ValueError, match="lacks 1 of their pairs"):
        distance_matrix(rows)


def test_mds_recovers_the_distances_of_a_planar_configuration() -> None:
    points = np.array([[0.0, 0.0], [3.0, 0.0], [3.0, 4.0], [0.0, 4.0], [1.0, 1.0], [6.0, 2.0]])
    metric = embed_heads(squareform(pdist(points)), metric=True)
    np.testing.assert_allclose(pdist(metric.xy), pdist(points), atol=1e-6)
    assert metric.stress < 1e-6 and metric.metric
    # non-metric: the same configuration up to scale (only the order of the distances is fitted)
    nonmetric = embed_heads(squareform(pdist(points)))
    ratios = pdist(nonmetric.xy) / pdist(points)
    np.testing.assert_allclose(ratios, ratios[0], rtol=1e-6)
    assert nonmetric.stress < 1e-6 and not nonmetric.metric


def test_mds_of_points_on_a_line_keeps_their_gaps() -> None:
    positions = np.array([0.0, 1.0, 3.0, 6.0])
    embedding = embed_heads(np.abs(positions[:, None] - positions[None, :]), metric=True)
    np.testing.assert_allclose(pdist(embedding.xy), pdist(positions[:, None]), atol=1e-6)


def test_nonmetric_mds_keeps_the_rank_order_that_metric_mds_breaks() -> None:
    """The squared distances of (2, 3), (4, 1), (3, 4), (0, 2): 2 < 5 < 8 < 10 < 13 < 17, which no
    planar configuration has as distances. Kruskal's non-metric MDS (Clark §6) fits their order
    exactly; metric MDS fits the values, with a poor Stress-1 of 0.17, and puts heads 0 and 1
    (8 apart) farther apart than heads 1 and 2 (10 apart)."""
    squared = np.array([[0, 8, 2, 5], [8, 0, 10, 17], [2, 10, 0, 13], [5, 17, 13, 0]], dtype=float)
    nonmetric, metric = embed_heads(squared), embed_heads(squared, metric=True)
    order = np.argsort(squareform(squared))
    assert (np.diff(pdist(nonmetric.xy)[order]) > 1e-3).all()  # strictly increasing with the input
    assert nonmetric.stress < 1e-6 and not nonmetric.metric
    assert metric.stress == pytest.approx(0.168, abs=1e-3) and metric.metric
    xy = metric.xy
    assert np.linalg.norm(xy[0] - xy[1]) > np.linalg.norm(xy[1] - xy[2])  # 8 drawn longer than 10
    # deterministic: a classical-MDS start, no random one
    np.testing.assert_array_equal(embed_heads(squared).xy, nonmetric.xy)


def test_mds_starts_where_classical_mds_has_negative_eigenvalues() -> None:
    """Squared gaps on a line give the double-centred matrix one positive eigenvalue; scikit-learn's
    classical start would take the root of a negative one (NaN). The start clips it to 0."""
    positions = np.array([0.0, 1.0, 3.0, 7.0])
    start = classical_start((positions[:, None] - positions[None, :]) ** 2)
    assert np.isfinite(start).all() and np.allclose(start[:, 1], 0.0, atol=1e-6)
