"""Dependency probing classifiers (Clark §5): features, training, UAS, baselines, asset."""

from dataclasses import replace
from pathlib import Path

import polars as pl
import pytest
import torch

from dagster_project.compute.models import load_encoder
from dagster_project.compute.probes import (
    IGNORE,
    ROOT,
    ProbeBatch,
    attention_features,
    gold_heads,
    offset_features,
    predict_heads,
    probe_for,
    random_init_encoder,
    right_branching,
    train_probe,
    uas,
    with_offset_features,
)

# Gold heads as candidate indices (0 = ROOT, j + 1 = word j) of three 5-word sentences.
TREES = ([2, 0, 2, 3, 2], [0, 1, 4, 1, 4], [3, 3, 0, 3, 4])


def _batch(trees: list[list[int]], split_word: int = 1) -> ProbeBatch:
    """Token-level attention where head (1, 1) sends every piece of word i entirely to the
    first piece of its gold head ([CLS] for the root) and head (1, 2) is uniform; word
    `split_word` has two pieces. Goes through `attention_features` like the real pipeline."""
    n_words = len(trees[0])
    first_piece = [1 + w + (w > split_word) for w in range(n_words)]  # [CLS] at 0
    width = n_words + 3  # [CLS], the words (one of them two pieces), [SEP]
    attn = torch.full((len(trees), 1, 2, width, width), 1 / width)
    attn[:, :, 0] = 0
    for b, tree in enumerate(trees):
        for word, gold in enumerate(tree):
            target = 0 if gold == ROOT else first_piece[gold - 1]
            pieces = [first_piece[word]] + ([first_piece[word] + 1] if word == split_word else [])
            attn[b, 0, 0, pieces, target] = 1
        attn[b, 0, 0, 0, 0] = attn[b, 0, 0, -1, -1] = 1
    start = torch.tensor([first_piece] * len(trees))
    end = start + (torch.arange(n_words) == split_word)[None] + 1
    membership = ((torch.arange(width) >= start[..., None]) & (torch.arange(width) < end[..., None])).float()
    cls = torch.zeros(len(trees), width, dtype=torch.bool)
    cls[:, 0] = True
    sep = torch.zeros_like(cls)
    sep[:, -1] = True
    pair, root = attention_features(attn, membership, cls, sep, "mean")
    gold = torch.tensor(trees)
    return ProbeBatch(
        pair=pair,
        root=root,
        vectors=torch.randn(len(trees), n_words, 3, generator=torch.Generator().manual_seed(0)),
        gold=gold,
        scored=torch.ones_like(gold, dtype=torch.bool),
        words=torch.ones_like(gold, dtype=torch.bool),
    )


def test_attention_features_shapes_and_root_columns():
    batch = _batch([TREES[0]])
    assert batch.pair.shape == (1, 2, 5, 5) and batch.root.shape == (1, 4 * 2 + 1, 5)
    # Head 1: word 0 -> word 1 fully; the split word 1 (the root) -> [CLS] from both pieces.
    assert batch.pair[0, 0, 0].tolist() == [0, 1, 0, 0, 0]
    assert batch.root[0, 0].tolist() == [0, 1, 0, 0, 0]  # word -> [CLS], head 1
    assert batch.root[0, 1, 1].item() == pytest.approx(1 / 8)  # uniform head: 1 of 8 tokens is [CLS]
    assert batch.pair[0, 1, 1].tolist() == pytest.approx([1 / 8, 2 / 8, 1 / 8, 1 / 8, 1 / 8])  # TO a split word = sum
    assert batch.root[0, -1].tolist() == [1] * 5


def test_attention_probe_learns_the_gold_head_exactly():
    train, test = _batch([TREES[0], TREES[1]]), _batch([TREES[2]])
    untrained = probe_for(train, use_words=False, both_directions=True)
    probe = probe_for(train, use_words=False, both_directions=True)
    train_probe(probe, [train], epochs=60, learning_rate=0.1, seed=0)
    assert uas([predict_heads(probe, test)], [test]) == 1.0
    assert uas([predict_heads(untrained, test)], [test]) < 0.5


def test_right_branching_and_punctuation_excluded():
    batch = _batch([TREES[0], [2, 3, 4, 5, 0]])
    assert right_branching(batch).tolist() == [[2, 3, 4, 5, 0]] * 2
    # Sentence 1 gets only word 0 right; sentence 2 is right-branching: 6 of 10.
    assert uas([right_branching(batch)], [batch]) == pytest.approx(6 / 10)
    # Word 4 of sentence 1 is punctuation (a miss): left out, 6 of 9.
    scored = batch.scored.clone()
    scored[0, 4] = False
    assert uas([right_branching(batch)], [replace(batch, scored=scored)]) == pytest.approx(6 / 9)


def test_padded_words_are_never_candidates_nor_trained():
    batch = _batch([TREES[0]])
    words = batch.words.clone()
    words[0, 4] = False
    gold = batch.gold.clone()
    gold[0, 4] = IGNORE
    padded = replace(batch, words=words, gold=gold)
    logits = probe_for(padded, use_words=True, both_directions=True)(padded)
    assert torch.isinf(logits[0, :, 5]).all() and torch.isinf(logits[0, 2, 3])  # padded word, self
    assert right_branching(padded)[0].tolist() == [2, 3, 4, 0, 0]


def test_training_is_deterministic_with_a_seed():
    batches = [_batch([tree], split_word) for tree in TREES for split_word in (1, 3)]

    def trained(seed: int) -> torch.Tensor:
        probe = probe_for(batches[0], use_words=True, both_directions=True)
        train_probe(probe, batches, epochs=2, learning_rate=0.05, seed=seed)
        return torch.cat([parameter.detach().flatten() for parameter in probe.parameters()])

    assert torch.equal(trained(3), trained(3))
    assert not torch.equal(trained(3), trained(4))  # the seed orders the batches


def test_offset_features_are_one_hot_and_clipped():
    features = offset_features(13)[0]
    assert features.shape == (20, 13, 13)
    assert features.sum(0).tolist() == (1 - torch.eye(13)).tolist()  # exactly one bin off the diagonal
    assert features[10, 3, 4] == 1 and features[9, 4, 3] == 1  # +1 and -1
    assert features[19, 0, 12] == 1 and features[0, 12, 0] == 1  # farther than 10: clipped
    distance = with_offset_features(_batch([TREES[0]]))
    assert distance.pair.shape == (1, 20, 5, 5) and distance.root.tolist() == [[[1.0] * 5]]


def test_gold_heads_multiword_tokens_root_and_punctuation():
    dependencies = pl.DataFrame(
        {
            "example_id": [0] * 5,
            "ud_id": [1, 2, 3, 4, 5],
            "word_index": [0, 1, 1, 2, 3],  # "I don't know ." with do + n't on surface word 1
            "head_word_index": [2, 2, 1, None, 2],  # n't -> do stays inside the word
            "upos": ["PRON", "AUX", "PART", "VERB", "PUNCT"],
        }
    )
    gold = gold_heads(dependencies)
    assert gold["gold"].to_list() == [3, 3, ROOT, 3]
    assert gold["punct"].to_list() == [False, False, False, True]


def test_random_init_keeps_embeddings_only(tiny_model_dir: Path):
    model = load_encoder(str(tiny_model_dir)).model
    first, second = random_init_encoder(model, seed=7), random_init_encoder(model, seed=7)
    pretrained, fresh = model.state_dict(), first.state_dict()
    for name, value in pretrained.items():
        if name.startswith("embeddings."):
            assert torch.equal(fresh[name], value), name
        elif name.endswith("weight") and "LayerNorm" not in name:
            assert not torch.allclose(fresh[name], value), name
    assert all(torch.equal(value, second.state_dict()[name]) for name, value in fresh.items())
    assert model.config._attn_implementation == first.config._attn_implementation == "eager"
