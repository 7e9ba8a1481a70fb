"""Fact extraction on a tiny random BERT: batching and padding never change a number."""

import math
from pathlib import Path

import polars as pl
import pytest
import torch

from dagster_project.corpora import encode_corpus, read_demo_pairs
from dagster_project.facts import extract_attention_facts, length_batches
from dagster_project.models import load_encoder
from tests.conftest import TINY_HEADS, TINY_LAYERS


@pytest.fixture(scope="module")
def encoder(tiny_model_dir: Path):
    return load_encoder(str(tiny_model_dir))


@pytest.fixture(scope="module")
def demo_tokens(encoder) -> pl.DataFrame:
    return encode_corpus(read_demo_pairs(), encoder.tokenizer, 128, 12, 0).tokens


def test_length_batches_respect_budget_and_pad(demo_tokens):
    lengths = demo_tokens.group_by("example_id").len()
    batches = list(length_batches(demo_tokens, pad_token_id=0, batch_tokens=64, with_token_types=True))
    assert sum(len(batch.example_ids) for batch in batches) == 12
    for batch in batches:
        rows, width = batch.inputs["input_ids"].shape
        assert rows * width <= 64 or rows == 1
        assert torch.equal(batch.inputs["attention_mask"].sum(-1), batch.masks.valid.sum(-1))
        expected = lengths.filter(pl.col("example_id").is_in(batch.example_ids.tolist())).sort("example_id")["len"]
        assert sorted(batch.masks.valid.sum(-1).tolist()) == sorted(expected.to_list())
        assert batch.masks.cls[:, 0].all() and batch.masks.sep.sum(-1).eq(2).all()


def test_padded_batches_match_single_examples(encoder, demo_tokens):
    one_by_one = extract_attention_facts(encoder, demo_tokens, batch_tokens=1)
    padded = extract_attention_facts(encoder, demo_tokens, batch_tokens=4096)
    keys = ["example_id", "layer", "head"]
    a, b = one_by_one.head_summaries.sort(keys), padded.head_summaries.sort(keys)
    assert a.height == b.height == 12 * TINY_LAYERS * TINY_HEADS
    for column in ["to_cls", "to_sep", "to_punct", "to_prev", "entropy", "cls_entropy", "sep_to_sep"]:
        assert (a[column] - b[column]).abs().max() < 1e-5, column
    hist_keys = ["example_id", "scope", "layer", "head", "offset"]
    ha, hb = one_by_one.position_histograms.sort(hist_keys), padded.position_histograms.sort(hist_keys)
    assert ha.select(hist_keys + ["pair_count"]).equals(hb.select(hist_keys + ["pair_count"]))
    assert (ha["weight_sum"] - hb["weight_sum"]).abs().max() < 1e-5


def test_histograms_account_for_every_pair(encoder, demo_tokens):
    facts = extract_attention_facts(encoder, demo_tokens)
    n = demo_tokens.group_by("example_id").agg(n=pl.len(), content=(~pl.col("token_class").is_in(["cls", "sep"])).sum())
    per_head = (
        facts.position_histograms.group_by("example_id", "scope", "layer", "head")
        .agg(pairs=pl.col("pair_count").sum(), mass=pl.col("weight_sum").sum(), offsets=pl.len())
        .join(n, on="example_id")
    )
    full = per_head.filter(pl.col("scope") == "all")
    assert (full["pairs"] == full["n"] ** 2).all()
    assert (full["offsets"] == 2 * full["n"] - 1).all()
    assert ((full["mass"] - full["n"]).abs() < 1e-4).all()  # each of the n rows sums to 1
    content = per_head.filter(pl.col("scope") == "content")
    assert (content["pairs"] == content["content"] ** 2).all()
    assert (content["mass"] < content["content"]).all()
    summaries = facts.head_summaries.join(n, on="example_id")
    assert (summaries["n_tokens"] == summaries["n"]).all()
    assert summaries["row_sum_error"].max() < 1e-5
    assert ((summaries["entropy"] >= 0) & (summaries["entropy"] <= summaries["n"].log() + 1e-5)).all()


@pytest.fixture(scope="module")
def demo_words(encoder) -> pl.DataFrame:
    return encode_corpus(read_demo_pairs(), encoder.tokenizer, 128, 12, 0).words


def test_relation_hits_do_not_depend_on_batching(encoder, demo_tokens, demo_words):
    one_by_one = extract_attention_facts(encoder, demo_tokens, batch_tokens=1, words=demo_words, word_mode="max")
    padded = extract_attention_facts(encoder, demo_tokens, batch_tokens=4096, words=demo_words, word_mode="max")
    keys = ["example_id", "word_index", "layer", "head"]
    assert one_by_one.relation_hits.sort(keys).equals(padded.relation_hits.sort(keys))
    real = demo_words.filter(pl.col("piece_start").is_not_null())
    assert padded.relation_hits.height == real.height * TINY_LAYERS * TINY_HEADS
    assert set(padded.relation_hits["word_mode"]) == {"max"}


def test_relation_hits_are_the_word_level_argmax(encoder, demo_tokens, demo_words):
    """Recompute one example's hits from its piece map with the word rules written out."""
    facts = extract_attention_facts(encoder, demo_tokens, words=demo_words)
    example = int(demo_tokens["example_id"].min())
    ids = demo_tokens.filter(pl.col("example_id") == example).sort("position")["token_id"].to_list()
    segments = demo_tokens.filter(pl.col("example_id") == example).sort("position")["segment"].to_list()
    with torch.inference_mode():
        out = encoder.model(input_ids=torch.tensor([ids]), token_type_ids=torch.tensor([segments]), output_attentions=True)
    words = demo_words.filter((pl.col("example_id") == example) & pl.col("piece_start").is_not_null()).sort("word_index")
    layer, head = 2, 3
    piece_map = out.attentions[layer - 1][0, head - 1]
    spans = list(zip(words["piece_start"], words["piece_end"]))
    to_words = torch.stack([piece_map[:, start:end].sum(-1) for start, end in spans], dim=-1)
    word_map = torch.stack([to_words[start:end].mean(0) for start, end in spans])
    word_map.fill_diagonal_(-1.0)
    expected = dict(zip(words["word_index"], [words["word_index"][i] for i in word_map.argmax(-1).tolist()]))
    hits = facts.relation_hits.filter((pl.col("example_id") == example) & (pl.col("layer") == layer) & (pl.col("head") == head))
    assert dict(zip(hits["word_index"], hits["target_word"])) == expected


def test_head_distances_sum_over_batches(encoder, demo_tokens):
    whole = extract_attention_facts(encoder, demo_tokens, batch_tokens=4096, head_distances=True).head_distances
    split = extract_attention_facts(encoder, demo_tokens, batch_tokens=64, head_distances=True).head_distances
    n_heads = TINY_LAYERS * TINY_HEADS
    assert whole.height == n_heads**2
    assert whole["tokens"][0] == demo_tokens.height
    keys = ["layer_a", "head_a", "layer_b", "head_b"]
    # float32 entropies: the mixture-minus-mean difference keeps ~3 significant digits
    assert ((whole.sort(keys)["js_sum"] - split.sort(keys)["js_sum"]).abs() <= 1e-3 * whole.sort(keys)["js_sum"] + 1e-7).all()
    diagonal = whole.filter((pl.col("layer_a") == pl.col("layer_b")) & (pl.col("head_a") == pl.col("head_b")))
    assert diagonal["js_sum"].abs().max() == 0
    mirrored = whole.join(whole, left_on=keys, right_on=["layer_b", "head_b", "layer_a", "head_a"])
    assert (mirrored["js_sum"] - mirrored["js_sum_right"]).abs().max() == 0
    # JS is at most ln 2 per token.
    assert 0 < whole["js_sum"].max() <= math.log(2) * demo_tokens.height
