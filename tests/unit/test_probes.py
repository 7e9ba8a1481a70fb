"""Dependency probing classifiers (Clark §5): features, training, UAS, baselines, asset."""

import math
from dataclasses import replace
from pathlib import Path

import duckdb
import polars as pl
import pytest
import torch

from dagster_project.compute.backoff import PassOutOfMemory
from dagster_project.compute.clark.probe_inputs import (
    IGNORE,
    ROOT,
    ProbeBatch,
    attention_features,
    gold_heads,
    read_word_vectors,
)
from dagster_project.compute.clark.probes import (
    DISTANCE_FEATURES,
    attachment_counts,
    distance_features,
    distance_probe_for,
    predict_heads,
    probe_for,
    random_init_encoder,
    right_branching,
    train_probe,
    uas,
)
from dagster_project.compute.models import ModelSpec, load_encoder
from dagster_project.storage.batches import partition_rows
from dagster_project.storage.model_rows import upsert_model
from dagster_project.storage.partition_writes import replace_partition
from dagster_project.storage.views import apply_views
from tests.out_of_memory import batch_rows, out_of_memory_above

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


def test_distance_features_indicators_and_continuous_ahead_behind():
    features = distance_features(13)
    assert features.shape == (13, 13, DISTANCE_FEATURES)
    indicators, continuous = features[..., :10], features[..., 10:]
    # one indicator per offset -5..-1, 1..5; none on the diagonal nor farther than 5
    assert indicators[4, 5].tolist() == [0] * 5 + [1] + [0] * 4  # +1
    assert indicators[5, 4].tolist() == [0] * 4 + [1] + [0] * 5  # -1
    assert indicators[0, 12].sum() == 0 and indicators[3, 3].sum() == 0
    # candidate 12 words ahead / 7 behind: continuous, not clipped (the old probe's last bin was +-10)
    assert continuous[0, 12].tolist() == pytest.approx([math.log(13), 0.0, 1.2, 0.0])
    assert continuous[9, 2].tolist() == pytest.approx([0.0, math.log(8), 0.0, 0.7])


def test_distance_probe_is_a_one_hidden_layer_network_by_hand():
    batch = _batch([TREES[0]])
    probe = distance_probe_for(batch, hidden=4, seed=0)
    v, d = batch.vectors[0], distance_features(5)
    i, j = 2, 4  # dependent word 2, candidate word 4 (logit column j + 1)
    hidden = probe.dependent.weight @ v[i] + probe.dependent.bias + probe.candidate.weight @ v[j]
    hidden = hidden + probe.distance.weight @ d[i, j]
    expected = probe.output.weight[0] @ torch.relu(hidden)
    root = probe.output.weight[0] @ torch.relu(probe.dependent.weight @ v[i] + probe.dependent.bias + probe.root)
    logits = probe(batch)
    assert logits[0, i, j + 1].item() == pytest.approx(expected.item(), abs=1e-6)
    assert logits[0, i, ROOT].item() == pytest.approx(root.item(), abs=1e-6)
    assert torch.isinf(logits[0, i, i + 1])  # a word is not its own head
    assert torch.equal(distance_probe_for(batch, 4, 0).output.weight, probe.output.weight)  # seeded


def test_distance_probe_learns_heads_farther_than_the_old_clip():
    """Each word's head is 12 words to its left, else ROOT: the continuous distances tell
    offset -12 from -11 and -13, which one-hot offsets clipped at +-10 could not."""
    trees = [[0] * 12 + [w - 11 for w in range(12, 16)]]
    width = len(trees[0])
    batch = ProbeBatch(
        pair=torch.zeros(1, 1, width, width),
        root=torch.zeros(1, 1, width),
        vectors=torch.zeros(1, width, 3),
        gold=torch.tensor(trees),
        scored=torch.ones(1, width, dtype=torch.bool),
        words=torch.ones(1, width, dtype=torch.bool),
    )
    probe = distance_probe_for(batch, hidden=16, seed=0)
    train_probe(probe, [batch], epochs=300, learning_rate=0.05, seed=0)
    assert uas([predict_heads(probe, batch)], [batch]) == 1.0


def test_word_vectors_from_a_glove_style_file(tmp_path: Path):
    path = tmp_path / "vectors.txt"
    path.write_text("3 2\nthe 1 2\ncat 3 4\nCat 5 6\nunused 7 8\n", encoding="utf-8")  # word2vec header line
    table = read_word_vectors(path, {"The", "Cat", "dog"})
    assert (table.name, set(table.index)) == ("vectors.txt", {"the", "cat", "Cat"})  # lowercase forms kept too
    vectors, found = table.lookup(["The", "Cat", "dog"])
    assert vectors.tolist() == [[1, 2], [5, 6], [0, 0]] and found.tolist() == [True, True, False]
    path.write_text("the 1 2\ncat 3\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"vectors.txt, line 2: 1 numbers after the word, expected 2"):
        read_word_vectors(path, {"cat"})
    path.write_text("a 1\n", encoding="utf-8")
    with pytest.raises(ValueError, match="none of the 1 corpus words has a vector"):
        read_word_vectors(path, {"b"})
    with pytest.raises(FileNotFoundError, match="word_vectors_file"):
        read_word_vectors(tmp_path / "absent.txt", {"cat"})


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
    assert gold["scored"].to_list() == [True, True, False, False]  # the root and "." are not scored


def _sentence_batch(dependencies: pl.DataFrame) -> ProbeBatch:
    """A one-sentence ProbeBatch of gold_heads (no attention: for the baselines and UAS)."""
    gold = gold_heads(dependencies).sort("word_index")
    width = gold.height
    return ProbeBatch(
        pair=torch.zeros(1, 1, width, width),
        root=torch.zeros(1, 1, width),
        vectors=torch.zeros(1, width, 2),
        gold=torch.tensor([gold["gold"].to_list()]),
        scored=torch.tensor([gold["scored"].to_list()]),
        words=torch.ones(1, width, dtype=torch.bool),
    )


def test_table3_scores_the_words_whose_head_is_another_word():
    """ "The dog barked .": The -> dog, dog -> barked, barked the root, "." punctuation. Right-branching
    gets The -> dog and dog -> barked; "barked" (the root) is no word's dependent, so Clark §5's
    classifier ("a probability distribution over other words") has no right answer for it: 2 of 2,
    where counting the root made it 2 of 3."""
    dependencies = pl.DataFrame(
        {
            "example_id": [0] * 4,
            "ud_id": [1, 2, 3, 4],
            "word_index": [0, 1, 2, 3],
            "head_word_index": [1, 2, None, 2],
            "upos": ["DET", "NOUN", "VERB", "PUNCT"],
        }
    )
    batch = _sentence_batch(dependencies)
    assert right_branching(batch).tolist() == [[2, 3, 4, ROOT]]
    assert attachment_counts([right_branching(batch)], [batch]) == (2, 2)
    assert uas([right_branching(batch)], [batch]) == 1.0


# "We gonna win .": gonna = gon (the root) + na (mark -> win); the word's head is na's, win.
GONNA = pl.DataFrame(
    {
        "example_id": [0] * 5,
        "ud_id": [1, 2, 3, 4, 5],
        "word_index": [0, 1, 1, 2, 3],
        "head_word_index": [1, None, 2, 1, 1],
        "relation": ["nsubj", "root", "mark", "xcomp", "punct"],
        "upos": ["PRON", "VERB", "PART", "VERB", "PUNCT"],
    }
)


def test_table3_and_table1_all_score_the_same_words():
    """gold_heads' scored words and heads are Table 1's 'All' edges (int_dependency_edges), a
    multiword token half of which is the root included: "gonna" -> "win" in both."""
    conn = duckdb.connect(":memory:")
    apply_views(conn)
    spec = ModelSpec("org--m", "org/m", "/x", "r1", "bert", 1, 2, True)
    upsert_model(conn, spec)
    replace_partition(conn, {"dependencies": GONNA}, spec.model_id, "ud")
    table1 = partition_rows(conn, "int_dependency_edges", spec.model_id).filter(pl.col("relation") == "All")
    table3 = gold_heads(GONNA).filter("scored")
    assert sorted(zip(table3["word_index"], table3["gold"] - 1)) == [(0, 1), (1, 2), (2, 1)]
    assert sorted(zip(table1["dependent_word"], table1["head_word"])) == [(0, 1), (1, 2), (2, 1)]
    conn.close()


def test_the_attention_and_words_probe_learns_only_w_and_u():
    """Clark §5: "only the two weight matrices W and U are learned" (the ROOT candidate's W' is
    the released code's); the attention-only probe's weights are its w and u; the bias is an option."""
    batch = _batch([TREES[0]])

    def learned(probe: torch.nn.Module) -> set[str]:
        return {name for name, _ in probe.named_parameters()}

    assert learned(probe_for(batch, use_words=True, both_directions=True)) == {
        "pair_dependent",
        "pair_candidate",
        "root_dependent",
    }
    with_bias = probe_for(batch, use_words=True, both_directions=True, bias=True)
    assert learned(with_bias) == {"pair_dependent", "pair_candidate", "root_dependent", "pair_bias", "root_bias"}
    assert learned(probe_for(batch, use_words=False, both_directions=True)) == {"pair_bias", "root_bias"}


def test_the_attention_and_words_probe_by_hand():
    """score(i, j) = W_k . (v_i + v_j) alpha_ij + U_k . (v_i + v_j) alpha_ji for one head (k = 0):
    with word vectors all zero it is 0 whatever the training, unless a bias is learned."""
    batch = _batch([TREES[0]])
    batch = replace(batch, pair=batch.pair[:, :1], vectors=torch.tensor([[[1.0, 0], [0, 1], [1, 1], [2, 0], [0, 2]]]))
    probe = probe_for(batch, use_words=True, both_directions=True)
    with torch.no_grad():
        probe.pair_dependent.copy_(torch.tensor([[1.0, 2.0], [3.0, 0.0]]))  # W's, then U's dependent half
        probe.pair_candidate.copy_(torch.tensor([[0.0, 1.0], [1.0, 1.0]]))  # W's, then U's candidate half
    v, alpha = batch.vectors[0], batch.pair[0, 0]
    i, j = 0, 1  # word 0 attends fully to word 1 (its gold head); word 1 to [CLS]
    weight_w = torch.tensor([1.0, 2.0]) @ v[i] + torch.tensor([0.0, 1.0]) @ v[j]
    weight_u = torch.tensor([3.0, 0.0]) @ v[i] + torch.tensor([1.0, 1.0]) @ v[j]
    expected = weight_w * alpha[i, j] + weight_u * alpha[j, i]
    assert probe(batch)[0, i, j + 1].item() == pytest.approx(expected.item()) == pytest.approx(2.0)

    blind = replace(batch, vectors=torch.zeros_like(batch.vectors))
    paper, biased = probe_for(blind, True, True), probe_for(blind, True, True, bias=True)
    for probe in (paper, biased):
        train_probe(probe, [blind], epochs=20, learning_rate=0.1, seed=0)
    allowed = blind.candidates
    assert (paper(blind)[allowed] == 0).all()  # nothing to learn from without word vectors
    assert uas([predict_heads(biased, blind)], [blind]) == 1.0  # the bias alone is the attention-only probe


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


def _probe_and_batches() -> tuple[torch.nn.Module, list[ProbeBatch]]:
    batches = [_batch(list(TREES), split_word) for split_word in (1, 3)]  # 2 batches of 3 sentences
    return probe_for(batches[0], use_words=True, both_directions=True), batches


def test_out_of_memory_halves_the_micro_batch_and_trains_as_a_run_at_it(caplog):
    probe, batches = _probe_and_batches()
    with caplog.at_level("WARNING"), out_of_memory_above(probe, 1, batch_rows) as tried:
        loss = train_probe(probe, batches, epochs=3, learning_rate=0.05, seed=2)
    assert [record.getMessage() for record in caplog.records] == [
        "Probe training: out of memory on cpu at 3 sentences per micro-batch, retrying at 1"
    ]
    assert tried[:2] == [3, 1] and set(tried[2:]) == {1}
    reference, _ = _probe_and_batches()
    assert loss == train_probe(reference, batches, epochs=3, learning_rate=0.05, seed=2, micro_batch=1)
    for got, expected in zip(probe.parameters(), reference.parameters()):
        assert torch.equal(got, expected)
    # summed over its sentences, a batch trains as a whole: the same parameters, to rounding
    whole, _ = _probe_and_batches()
    assert train_probe(whole, batches, epochs=3, learning_rate=0.05, seed=2) == pytest.approx(loss, rel=1e-5)
    for got, expected in zip(probe.parameters(), whole.parameters()):
        torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-6)


def test_out_of_memory_at_one_sentence_names_what_to_lower():
    probe, batches = _probe_and_batches()
    with out_of_memory_above(probe, 0, batch_rows), pytest.raises(PassOutOfMemory) as raised:
        train_probe(probe, batches, epochs=1, learning_rate=0.05, seed=2)
    assert str(raised.value).startswith(
        "Probe training: out of memory on cpu even at its smallest size (sentences per micro-batch: 1)"
    )
    assert "Lower the run config's batch_tokens or the corpus's max_len" in str(raised.value)
