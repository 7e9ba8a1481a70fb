"""Fact extraction on a tiny random BERT: batching and padding never change a number."""

import math
from dataclasses import replace

import polars as pl
import pytest
import torch

from dagster_project.compute.attention_facts import feature_pair_links, head_map_frame, relation_hit_rows
from dagster_project.compute.attention_pass import AttentionFacts, extract_attention_facts, pass_inputs
from dagster_project.compute.batching import Batch, histogram_rows, length_batches
from dagster_project.compute.fact_kinds import FACT_KINDS, HEAD_MAP_EXAMPLES, figure_5_examples
from dagster_project.compute.metrics import TokenMasks
from dagster_project.corpora import encode_corpus, read_demo_pairs
from tests.tiny_models import TINY_HEADS, TINY_LAYERS


def extract(
    encoder,
    tokens: pl.DataFrame,
    kinds: tuple[str, ...] = ("position_histograms",),
    words=None,
    batch_tokens=4096,
    **options,
) -> AttentionFacts:
    """One pass writing the named kinds (and the head summaries every pass writes)."""
    inputs = pass_inputs(encoder, tokens, words, **options)
    return extract_attention_facts(encoder, tokens, [FACT_KINDS[kind] for kind in kinds], inputs, batch_tokens)


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
    one_by_one = extract(encoder, demo_tokens, batch_tokens=1)
    padded = extract(encoder, demo_tokens, batch_tokens=4096)
    keys = ["example_id", "layer", "head"]
    a, b = one_by_one.tables["head_summaries"].sort(keys), padded.tables["head_summaries"].sort(keys)
    assert a.height == b.height == 12 * TINY_LAYERS * TINY_HEADS
    for column in ["to_cls", "to_sep", "to_punct", "to_prev", "entropy", "cls_entropy", "sep_to_sep"]:
        assert (a[column] - b[column]).abs().max() < 1e-5, column
    hist_keys = ["example_id", "scope", "layer", "head", "offset"]
    ha, hb = (
        histogram_rows(one_by_one.tables["position_histograms"], "attention").sort(hist_keys),
        histogram_rows(padded.tables["position_histograms"], "attention").sort(hist_keys),
    )
    assert ha.select(hist_keys + ["pair_count"]).equals(hb.select(hist_keys + ["pair_count"]))
    assert (ha["weight_sum"] - hb["weight_sum"]).abs().max() < 1e-5


def test_histograms_account_for_every_pair(encoder, demo_tokens):
    facts = extract(encoder, demo_tokens)
    n = demo_tokens.group_by("example_id").agg(n=pl.len(), content=(~pl.col("token_class").is_in(["cls", "sep"])).sum())
    per_head = (
        histogram_rows(facts.tables["position_histograms"], "attention")
        .group_by("example_id", "scope", "layer", "head")
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
    summaries = facts.tables["head_summaries"].join(n, on="example_id")
    assert (summaries["n_tokens"] == summaries["n"]).all()
    assert summaries["row_sum_error"].max() < 1e-5
    assert ((summaries["entropy"] >= 0) & (summaries["entropy"] <= summaries["n"].log() + 1e-5)).all()


@pytest.fixture(scope="module")
def demo_words(encoder) -> pl.DataFrame:
    return encode_corpus(read_demo_pairs(), encoder.tokenizer, 128, 12, 0).words


def test_relation_hits_do_not_depend_on_batching(encoder, demo_tokens, demo_words):
    one_by_one = extract(encoder, demo_tokens, ("relation_hits",), demo_words, batch_tokens=1, word_mode="max")
    padded = extract(encoder, demo_tokens, ("relation_hits",), demo_words, word_mode="max")
    keys = ["example_id", "word_index", "layer", "head"]
    hits = relation_hit_rows(padded.tables["relation_hits"])
    assert relation_hit_rows(one_by_one.tables["relation_hits"]).sort(keys).equals(hits.sort(keys))
    real = demo_words.filter(pl.col("piece_start").is_not_null())
    assert hits.height == real.height * TINY_LAYERS * TINY_HEADS
    assert set(hits["word_mode"]) == {"max"}


def test_relation_hits_are_the_word_level_argmax(encoder, demo_tokens, demo_words):
    """Recompute one example's hits from its piece map with the word rules written out."""
    facts = extract(encoder, demo_tokens, ("relation_hits",), demo_words)
    example = int(demo_tokens["example_id"].min())
    ids = demo_tokens.filter(pl.col("example_id") == example).sort("position")["token_id"].to_list()
    segments = demo_tokens.filter(pl.col("example_id") == example).sort("position")["segment"].to_list()
    with torch.inference_mode():
        out = encoder.model(
            input_ids=torch.tensor([ids]), token_type_ids=torch.tensor([segments]), output_attentions=True
        )
    words = demo_words.filter((pl.col("example_id") == example) & pl.col("piece_start").is_not_null()).sort(
        "word_index"
    )
    layer, head = 2, 3
    piece_map = out.attentions[layer - 1][0, head - 1]
    spans = list(zip(words["piece_start"], words["piece_end"]))
    to_words = torch.stack([piece_map[:, start:end].sum(-1) for start, end in spans], dim=-1)
    word_map = torch.stack([to_words[start:end].mean(0) for start, end in spans])
    word_map.fill_diagonal_(-1.0)
    expected = dict(zip(words["word_index"], [words["word_index"][i] for i in word_map.argmax(-1).tolist()]))
    hits = relation_hit_rows(facts.tables["relation_hits"]).filter(
        (pl.col("example_id") == example) & (pl.col("layer") == layer) & (pl.col("head") == head)
    )
    assert dict(zip(hits["word_index"], hits["target_word"])) == expected


def test_head_distances_sum_over_batches(encoder, demo_tokens):
    whole = extract(encoder, demo_tokens, ("head_distances",)).tables["head_distances"]
    split = extract(encoder, demo_tokens, ("head_distances",), batch_tokens=64).tables["head_distances"]
    n_heads = TINY_LAYERS * TINY_HEADS
    assert whole.height == n_heads * (n_heads - 1) // 2  # unordered pairs
    assert whole["tokens"][0] == demo_tokens.height
    keys = ["layer_a", "head_a", "layer_b", "head_b"]
    # float32 row entropies (~ln n each, summed over ~250 rows) minus their mixture: the
    # difference keeps about 1e-5 absolute precision
    assert (
        (whole.sort(keys)["js_sum"] - split.sort(keys)["js_sum"]).abs() <= 1e-3 * whole.sort(keys)["js_sum"] + 2e-5
    ).all()
    # JS is at most ln 2 per token.
    assert 0 < whole["js_sum"].max() <= math.log(2) * demo_tokens.height


def _example_maps(encoder, demo_tokens: pl.DataFrame, example: int) -> torch.Tensor:
    """(L, H, n, n) attention of one example, run alone (no padding)."""
    rows = demo_tokens.filter(pl.col("example_id") == example).sort("position")
    with torch.inference_mode():
        out = encoder.model(
            input_ids=torch.tensor([rows["token_id"].to_list()]),
            token_type_ids=torch.tensor([rows["segment"].to_list()]),
            output_attentions=True,
        )
    return torch.stack(out.attentions)[:, 0]


@pytest.fixture(scope="module")
def flagged_words(demo_words) -> pl.DataFrame:
    """Demo words with made-up spaCy flags: every third word a verb, the others nouns; words
    1, 4 and 7 subjects, of words 3 (a verb), 5 (a noun) and 9 (a verb); word 2 a pronoun; null
    flags must read as False."""
    index = pl.col("word_index")
    return demo_words.with_columns(
        is_noun=index % 3 != 0,
        is_verb=index % 3 == 0,
        is_pronoun=index == 2,
        is_subject=index.is_in([1, 4, 7]),
        is_object=pl.lit(None, dtype=pl.Boolean),
        is_negation=pl.lit(False),
        head_word_index=index.replace_strict({1: 3, 4: 5, 7: 9}, default=None, return_dtype=pl.Int32),
    )


def test_pattern_column_and_received_attention(encoder, demo_tokens):
    from dagster_project.compute.metrics import PATTERNS

    one_by_one = extract(encoder, demo_tokens, ("received_attention",), batch_tokens=1)
    padded = extract(encoder, demo_tokens, ("received_attention",))
    assert set(padded.tables["head_summaries"]["pattern"]) <= set(PATTERNS)
    keys = ["example_id", "layer", "head"]
    assert (
        one_by_one.tables["head_summaries"]
        .sort(keys)["pattern"]
        .equals(padded.tables["head_summaries"].sort(keys)["pattern"])
    )
    received_keys = ["example_id", "position", "layer", "head"]
    a, b = (
        one_by_one.tables["received_attention"].sort(received_keys),
        padded.tables["received_attention"].sort(received_keys),
    )
    assert a.height == b.height == demo_tokens.height * TINY_LAYERS * TINY_HEADS
    assert (a["received"] - b["received"]).abs().max() < 1e-6 and (a["from_cls"] - b["from_cls"]).abs().max() < 1e-6
    example = int(demo_tokens["example_id"].max())
    maps = _example_maps(encoder, demo_tokens, example)
    rows = b.filter((pl.col("example_id") == example) & (pl.col("layer") == 2) & (pl.col("head") == 4)).sort("position")
    assert torch.allclose(torch.tensor(rows["received"].to_numpy()), maps[1, 3].mean(0), atol=1e-6)
    assert torch.allclose(torch.tensor(rows["from_cls"].to_numpy()), maps[1, 3, 0], atol=1e-6)


def test_feature_pair_links_link_a_verb_to_its_subject_and_a_noun_to_its_antecedent():
    # words 0 and 6 are subjects of the verbs 2 and 5; word 1 the subject of a noun, word 4 of none
    words = pl.DataFrame(
        {
            "example_id": [0] * 7,
            "word_index": list(range(7)),
            "is_verb": [False, False, True, False, False, True, False],
            "is_subject": [True, True, False, False, True, False, True],
            "head_word_index": [2, 3, None, None, None, None, 5],
        }
    )
    # cluster a: John (0), the man (2-4, head 3), he (7): he's nearest noun antecedent is 3.
    # cluster b: a pronoun (9) whose only antecedent is a pronoun (8); cluster c: a pronoun (2)
    # before its noun (5); neither links.
    mentions = pl.DataFrame(
        {
            "example_id": [0] * 7,
            "cluster_id": ["a", "a", "a", "b", "b", "c", "c"],
            "word_start": [0, 2, 7, 8, 9, 2, 5],
            "word_end": [1, 4, 8, 9, 10, 3, 6],
            "head_word": [0, 3, 7, 8, 9, 2, 5],
            "mention_type": ["proper", "nominal", "pronoun", "pronoun", "pronoun", "pronoun", "nominal"],
        }
    )
    links = feature_pair_links(words, mentions)
    assert links.rows() == [(0, "noun_pronoun", 3, 7), (0, "verb_subject", 2, 0), (0, "verb_subject", 5, 6)]
    assert feature_pair_links(words)["pair"].to_list() == ["verb_subject", "verb_subject"]


def test_feature_pairs_are_word_level_means_over_linked_pairs(encoder, demo_tokens, flagged_words):
    example = int(demo_tokens["example_id"].min())
    mentions = pl.DataFrame(
        {
            "example_id": [example] * 2,
            "cluster_id": ["a", "a"],
            "word_start": [8, 10],
            "word_end": [9, 11],
            "head_word": [8, 10],
            "mention_type": ["nominal", "pronoun"],
        }
    )
    facts = extract(
        encoder,
        demo_tokens,
        ("received_attention", "feature_pair_attention"),
        flagged_words,
        batch_tokens=256,
        feature_links=feature_pair_links(flagged_words, mentions),
    )
    assert "relation_hits" not in facts.tables
    maps = _example_maps(encoder, demo_tokens, example)
    words = flagged_words.filter(pl.col("example_id") == example).sort("word_index")
    spans = dict(zip(words["word_index"], zip(words["piece_start"], words["piece_end"])))

    def word_attention(layer: int, head: int, q: int, k: int) -> float:
        return maps[layer - 1, head - 1, spans[q][0] : spans[q][1], spans[k][0] : spans[k][1]].sum(-1).mean().item()

    rows = facts.tables["feature_pair_attention"].filter(pl.col("example_id") == example)
    # verb 3 -> its subject 1 and verb 9 -> its subject 7 (subject 4's head is a noun); noun 8 ->
    # the pronoun 10 it is the antecedent of
    for pair, linked in {"verb_subject": [(3, 1), (9, 7)], "noun_pronoun": [(8, 10)]}.items():
        row = rows.filter((pl.col("pair") == pair) & (pl.col("layer") == 2) & (pl.col("head") == 3)).row(0, named=True)
        expected = sum(word_attention(2, 3, q, k) for q, k in linked) / len(linked)
        assert row["pairs"] == len(linked)
        assert row["attention"] == pytest.approx(expected, abs=1e-6)
    # without coreference, no noun -> pronoun rows
    assert set(facts.tables["feature_pair_attention"].filter(pl.col("example_id") != example)["pair"]) == {
        "verb_subject"
    }
    with pytest.raises(ValueError, match="feature_links"):
        extract(encoder, demo_tokens, ("feature_pair_attention",), flagged_words)


def test_frame_link_max_over_both_directions(encoder, demo_tokens, demo_words):
    example = int(demo_tokens["example_id"].min())
    links = pl.DataFrame(
        {"example_id": [example], "target_start": [0], "target_end": [1], "element_start": [2], "element_end": [4]}
    )
    facts = extract(encoder, demo_tokens, ("frame_link_attention",), demo_words, frame_links=links)
    assert facts.tables["frame_link_attention"].height == TINY_LAYERS * TINY_HEADS
    words = demo_words.filter(pl.col("example_id") == example).sort("word_index")
    lu = range(words["piece_start"][0], words["piece_end"][0])
    fe = range(words["piece_start"][2], words["piece_end"][3])
    maps = _example_maps(encoder, demo_tokens, example)
    for row in facts.tables["frame_link_attention"].iter_rows(named=True):
        piece_map = maps[row["layer"] - 1, row["head"] - 1]
        best = max(max(piece_map[q, k].item(), piece_map[k, q].item()) for q in lu for k in fe)
        assert row["max_attention"] == pytest.approx(best, abs=1e-7)


def test_pattern_example_maps_are_cropped_maps_of_their_class(encoder, demo_tokens):
    facts = extract(encoder, demo_tokens, ("pattern_example_maps",), pattern_examples=2)
    maps = facts.tables["pattern_example_maps"]
    per_class = maps.group_by("pattern").agg(
        examples=pl.col("example_id").n_unique(), heads=pl.struct("example_id", "layer", "head").n_unique()
    )
    assert (
        per_class.height >= 1
        and (per_class["examples"] <= 2).all()
        and (per_class["examples"] == per_class["heads"]).all()
    )
    lengths = demo_tokens.group_by("example_id").len()
    sizes = maps.group_by("pattern", "example_id").len().join(lengths, on="example_id")
    assert (sizes["len"] == sizes["len_right"] ** 2).all()
    chosen = maps.row(0, named=True)
    summary = facts.tables["head_summaries"].filter(
        (pl.col("example_id") == chosen["example_id"])
        & (pl.col("layer") == chosen["layer"])
        & (pl.col("head") == chosen["head"])
    )
    assert summary["pattern"][0] == chosen["pattern"]
    cells = maps.filter((pl.col("example_id") == chosen["example_id"]) & (pl.col("pattern") == chosen["pattern"])).sort(
        "query", "key"
    )
    expected = _example_maps(encoder, demo_tokens, chosen["example_id"])[chosen["layer"] - 1, chosen["head"] - 1]
    assert torch.allclose(torch.tensor(cells["attention"].to_numpy()), expected.reshape(-1), atol=1e-6)


def test_head_map_frame_keeps_the_whole_unpadded_maps_of_the_kept_examples():
    # example 7: 3 tokens; example 9: 2 tokens padded to 3; example 8: 3 tokens, not kept. One layer, two heads.
    maps = torch.zeros(3, 1, 2, 3, 3)
    maps[0, 0, 0] = torch.tensor([[0.5, 0.25, 0.25], [0.0, 1.0, 0.0], [0.125, 0.125, 0.75]])
    maps[0, 0, 1] = torch.eye(3)
    maps[1, 0, :] = 1 / 3
    maps[2, 0, 0, :2, :2] = torch.tensor([[0.25, 0.75], [1.0, 0.0]])
    maps[2, 0, 1, :2, :2] = torch.tensor([[0.5, 0.5], [0.5, 0.5]])
    valid = torch.tensor([[True] * 3, [True] * 3, [True, True, False]])
    none = torch.zeros(3, 3, dtype=torch.bool)
    batch = Batch(torch.tensor([7, 8, 9]), {}, TokenMasks(valid=valid, cls=none, sep=none, punct=none))
    rows = head_map_frame(maps, batch, torch.tensor([9, 7, 4]))
    assert rows.select("example_id", "layer", "head", "query").rows() == [
        (7, 1, 1, 0),
        (7, 1, 1, 1),
        (7, 1, 1, 2),
        (7, 1, 2, 0),
        (7, 1, 2, 1),
        (7, 1, 2, 2),
        (9, 1, 1, 0),
        (9, 1, 1, 1),
        (9, 1, 2, 0),
        (9, 1, 2, 1),
    ]
    assert rows["attention"].to_list() == [
        [0.5, 0.25, 0.25],
        [0.0, 1.0, 0.0],
        [0.125, 0.125, 0.75],
        [1.0, 0.0, 0.0],
        [0.0, 1.0, 0.0],
        [0.0, 0.0, 1.0],
        [0.25, 0.75],  # the padded key is not kept
        [1.0, 0.0],
        [0.5, 0.5],
        [0.5, 0.5],
    ]
    assert rows.schema["attention"] == pl.List(pl.Float32)
    assert head_map_frame(maps, batch, torch.tensor([1, 2])).height == 0


def test_figure_5_examples_are_the_first_with_each_relation():
    # example 3: det and the possessive's case (PART: not pobj); 5: obj and a preposition's case
    # (pobj); 8: aux:pass and another obj; nmod:poss nowhere
    dependencies = pl.DataFrame(
        {
            "example_id": [3, 3, 5, 5, 8, 8],
            "relation": ["det", "case", "obj", "case", "aux:pass", "obj"],
            "upos": ["DET", "PART", "NOUN", "ADP", "AUX", "NOUN"],
        }
    )
    assert figure_5_examples(dependencies, None) == (3, 5, 8)
    # coreference: example 2's mentions are of two clusters; in example 6, mention (4, 5) follows
    # (0, 1) of its cluster, and in example 9 too, but 6 comes first
    mentions = pl.DataFrame(
        {
            "example_id": [2, 2, 6, 6, 9, 9],
            "cluster_id": ["a", "b", "c", "c", "d", "d"],
            "word_start": [0, 3, 0, 4, 0, 2],
            "word_end": [1, 4, 1, 5, 1, 3],
        }
    )
    assert figure_5_examples(None, mentions) == (6,)
    assert figure_5_examples(dependencies, mentions) == (3, 5, 6, 8) and figure_5_examples(None, None) == ()


def test_head_example_maps_keep_the_figure_examples_too(encoder, demo_tokens):
    ids = sorted(demo_tokens["example_id"].unique().to_list())
    facts = extract(encoder, demo_tokens, ("head_example_maps",), figure_examples=(ids[-1], ids[0]))
    maps = facts.tables["head_example_maps"]
    kept = [*ids[:HEAD_MAP_EXAMPLES], ids[-1]]
    assert sorted(maps["example_id"].unique()) == kept and set(maps["kept_examples"]) == {len(kept)}
    [check] = FACT_KINDS["head_example_maps"].checks
    assert check.evaluate(facts.tables, pass_inputs(encoder, demo_tokens, figure_examples=(ids[-1],))).passed


def test_head_example_maps_are_the_first_examples_whole_maps(encoder, demo_tokens):
    spread = extract(encoder, demo_tokens, ("head_example_maps",), batch_tokens=64)  # many batches
    maps = spread.tables["head_example_maps"]
    first = sorted(demo_tokens["example_id"].unique().to_list())[:HEAD_MAP_EXAMPLES]
    assert sorted(maps["example_id"].unique()) == first and set(maps["kept_examples"]) == {HEAD_MAP_EXAMPLES}
    for example in first:
        expected = _example_maps(encoder, demo_tokens, example)  # (L, H, n, n), run alone
        rows = maps.filter(pl.col("example_id") == example).sort("layer", "head", "query")
        assert rows.height == TINY_LAYERS * TINY_HEADS * expected.shape[-1]
        stored = torch.tensor(rows["attention"].to_list()).reshape(expected.shape)
        assert torch.allclose(stored, expected, atol=1e-6)
    inputs = pass_inputs(encoder, demo_tokens)
    [check] = FACT_KINDS["head_example_maps"].checks
    outcome = check.evaluate(spread.tables, inputs)
    assert outcome.passed and outcome.metadata["max_row_sum_error"] < 1e-5, outcome.metadata
    # a map missing a row, or another example's, fails the check
    broken = {**spread.tables, "head_example_maps": maps.slice(1)}
    assert not check.evaluate(broken, inputs).passed
    other = replace(inputs, map_examples=(first[0], max(demo_tokens["example_id"])))
    assert not check.evaluate(spread.tables, other).passed
