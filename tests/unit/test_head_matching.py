"""Head correspondence (compute/compare/head_matching.py): JS distances against scipy, word rows on a hand-made
map, and the whole match of two models with different tokenizers against a plain loop over words."""

import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import torch
from scipy.spatial.distance import jensenshannon

from dagster_project.compute.compare.head_matching import (
    MatchSide,
    distances_in_range,
    js_distance_sums,
    match_heads,
    shared_words,
    word_distributions,
)
from dagster_project.compute.models import LoadedEncoder, load_encoder
from dagster_project.corpora.encoding import encode_corpus
from dagster_project.corpora.text_pairs import read_demo_pairs
from tests.tiny_models import TINY_HEADS, TINY_LAYERS, tiny_family


def test_js_distance_hand_computed() -> None:
    p = torch.tensor([[[1.0, 0.0], [0.5, 0.5]]])  # one row, two heads
    q = torch.tensor([[[0.0, 1.0], [1.0, 0.0], [0.5, 0.5]]])  # the same row, three heads
    sums = js_distance_sums(p, q)
    # [1,0] vs [0,1]: JS = ln 2; [1,0] vs [.5,.5]: M = [.75,.25], JS = H(M) - ln 2 / 2.
    h_m = -(0.75 * math.log(0.75) + 0.25 * math.log(0.25))
    expected = [
        [math.sqrt(math.log(2)), 0.0, math.sqrt(h_m - math.log(2) / 2)],
        [math.sqrt(h_m - math.log(2) / 2), math.sqrt(h_m - math.log(2) / 2), 0.0],
    ]
    np.testing.assert_allclose(sums.numpy(), expected, atol=1e-6)


@pytest.mark.parametrize("chunk_bytes", [1, 2**24])  # one row per chunk, and every row at once
def test_js_distance_sums_match_scipy(chunk_bytes: int) -> None:
    generator = np.random.default_rng(0)
    p = generator.dirichlet(np.full(6, 0.5), size=(7, 3))
    q = generator.dirichlet(np.full(6, 0.5), size=(7, 5))
    p[0, 0] = [0.5, 0.5, 0, 0, 0, 0]  # zeros in the rows: 0 log 0 = 0
    q[0, 1] = [0, 0, 0, 0, 0, 1.0]
    expected = np.array([[sum(jensenshannon(p[r, a], q[r, b]) for r in range(7)) for b in range(5)] for a in range(3)])
    sums = js_distance_sums(torch.tensor(p, dtype=torch.float32), torch.tensor(q, dtype=torch.float32), chunk_bytes)
    np.testing.assert_allclose(sums.numpy(), expected, atol=1e-5)


def test_js_distance_sums_refuses_unaligned_rows() -> None:
    with pytest.raises(ValueError, match="same R and K"):
        js_distance_sums(torch.ones(2, 3, 4) / 4, torch.ones(3, 3, 4) / 4)


def test_word_distributions_hand_made_map() -> None:
    # Tokens: [CLS] w0a w0b w1 [SEP]; word 0 is pieces 1-2, word 1 is piece 3.
    attn = torch.tensor(
        [
            [0.2, 0.2, 0.2, 0.2, 0.2],
            [0.1, 0.3, 0.2, 0.3, 0.1],  # w0a
            [0.5, 0.0, 0.0, 0.5, 0.0],  # w0b
            [0.0, 0.4, 0.4, 0.0, 0.2],  # w1
            [0.2, 0.2, 0.2, 0.2, 0.2],
        ]
    )[None, None, None]
    spans = torch.tensor([[[1, 3], [3, 4]]])
    rows = word_distributions(attn, spans)
    assert rows.shape == (1, 1, 2, 3)
    # w0: mean of its pieces' rows: to w0 (0.5 + 0.0) / 2, to w1 (0.3 + 0.5) / 2, rest 1 - 0.65.
    # w1: to w0 0.8, to w1 0.0, rest 0.2.
    np.testing.assert_allclose(rows[0, 0].numpy(), [[0.25, 0.4, 0.35], [0.8, 0.0, 0.2]], atol=1e-6)


def _side(folder: Path) -> MatchSide:
    encoder = load_encoder(str(folder))
    encoded = encode_corpus(read_demo_pairs(), encoder.tokenizer, 128, 4, 0)
    return MatchSide(encoder, encoded.tokens, encoded.words)


@pytest.fixture(scope="module")
def bert_side(tiny_model_dir: Path) -> MatchSide:
    return _side(tiny_model_dir)


@pytest.fixture(scope="module")
def mpnet_side(tmp_path_factory: pytest.TempPathFactory) -> MatchSide:
    return _side(tiny_family("mpnet", tmp_path_factory.mktemp("tiny-mpnet")))


def _word_rows_by_loop(encoder: LoadedEncoder, tokens: pl.DataFrame, spans: dict[int, tuple[int, int]]) -> np.ndarray:
    """(words, L*H, words + 1) word rows of one example, word by word and piece by piece."""
    tokens = tokens.sort("position")
    inputs = {"input_ids": torch.tensor([tokens["token_id"].to_list()])}
    if encoder.spec.takes_token_types:
        inputs["token_type_ids"] = torch.tensor([tokens["segment"].to_list()])
    with torch.inference_mode():
        attn = torch.stack(encoder.model(**inputs, output_attentions=True).attentions, 1)[0].numpy()
    attn = attn.reshape(-1, *attn.shape[-2:])  # (L*H, T, T)
    words = sorted(spans)
    rows = np.zeros((len(words), attn.shape[0], len(words) + 1))
    for row, query in enumerate(words):
        pieces = range(*spans[query])
        for column, key in enumerate(words):
            rows[row, :, column] = np.mean([attn[:, i, slice(*spans[key])].sum(-1) for i in pieces], axis=0)
        rows[row, :, -1] = 1 - rows[row, :, :-1].sum(-1)
    return rows


def test_match_heads_across_tokenizers_matches_a_loop(bert_side: MatchSide, mpnet_side: MatchSide) -> None:
    matches = match_heads(bert_side, mpnet_side, max_examples=3)
    words = shared_words(bert_side.words, mpnet_side.words)
    examples = sorted(set(words["example_id"]))[:3]
    total, n_words = np.zeros((TINY_LAYERS * TINY_HEADS, TINY_LAYERS * TINY_HEADS)), 0
    for example_id in examples:
        kept = words.filter(pl.col("example_id") == example_id)["word_index"].to_list()
        rows = []
        for side in (bert_side, mpnet_side):
            spans = side.words.filter((pl.col("example_id") == example_id) & pl.col("word_index").is_in(kept))
            rows.append(
                _word_rows_by_loop(
                    side.encoder,
                    side.tokens.filter(pl.col("example_id") == example_id),
                    {w: (s, e) for w, s, e in spans.select("word_index", "piece_start", "piece_end").iter_rows()},
                )
            )
        p, q = rows
        total += np.array(
            [
                [sum(jensenshannon(p[r, a], q[r, b]) for r in range(len(kept))) for b in range(q.shape[1])]
                for a in range(p.shape[1])
            ]
        )
        n_words += len(kept)
    assert (matches.n_examples, matches.n_words) == (3, n_words)
    # The tokenizers differ (WordPiece of bert-base vs the tiny MPNet's letters), so words have different pieces.
    assert not bert_side.words.join(
        mpnet_side.words, on=["example_id", "word_index", "piece_start", "piece_end"]
    ).equals(bert_side.words)
    distances = matches.distances.sort("layer", "head", "other_layer", "other_head")["js_distance"].to_numpy()
    np.testing.assert_allclose(distances, (total / n_words).ravel(), atol=1e-5)
    assert matches.distances.select("layer", "head").unique().height == TINY_LAYERS * TINY_HEADS


def test_a_model_matches_itself_head_for_head(bert_side: MatchSide) -> None:
    distances = match_heads(bert_side, bert_side, max_examples=2).distances
    same = distances.filter((pl.col("layer") == pl.col("other_layer")) & (pl.col("head") == pl.col("other_head")))
    assert same["js_distance"].max() < 1e-3
    nearest = distances.sort("js_distance").group_by("layer", "head").first()
    assert (nearest["layer"] == nearest["other_layer"]).all() and (nearest["head"] == nearest["other_head"]).all()


def test_match_heads_without_shared_examples_says_so(bert_side: MatchSide) -> None:
    elsewhere = MatchSide(
        bert_side.encoder, bert_side.tokens, bert_side.words.with_columns(pl.col("example_id") + 1000)
    )
    with pytest.raises(ValueError, match="share no example"):
        match_heads(bert_side, elsewhere)


def test_distances_in_range_check() -> None:
    rows = pl.DataFrame({"js_distance": [0.0, 0.5, math.sqrt(math.log(2))]})
    assert distances_in_range(rows, 3).passed
    assert not distances_in_range(rows, 4).passed  # a head pair missing
    assert not distances_in_range(rows.with_columns(js_distance=pl.Series([0.0, 0.9, 0.1])), 3).passed
    assert not distances_in_range(rows.with_columns(js_distance=pl.Series([0.0, float("nan"), 0.1])), 3).passed
    assert distances_in_range(rows.clear(), 0).passed  # no other model: nothing to compare, nothing wrong
