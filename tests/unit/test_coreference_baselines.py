"""Clark §4.3 baselines on a hand-built document whose right answers are known."""

import polars as pl
import pytest

from dagster_project.compute.clark.coreference_baselines import candidate_pairs, mention_features, predict_antecedents

WORDS = (
    "Mary saw the old dogs . John said that they bark . The Dogs growled at John "
    "while the dogs of Mary slept near the old dogs"
).split()
# (mention_id, cluster, word_start, word_end, head_word, mention_type, head_xpos)
MENTIONS = [
    (0, "A", 0, 1, 0, "proper", "NNP"),  # Mary
    (1, "B", 2, 5, 4, "nominal", "NNS"),  # the old dogs
    (2, "C", 6, 7, 6, "proper", "NNP"),  # John
    (3, "B", 9, 10, 9, "pronoun", "PRP"),  # they
    (4, "B", 12, 14, 13, "nominal", "NNS"),  # The Dogs
    (5, "C", 16, 17, 16, "proper", "NNP"),  # John
    (6, "D", 18, 22, 19, "nominal", "NNS"),  # the dogs of Mary
    (7, "A", 21, 22, 21, "proper", "NNP"),  # Mary (inside mention 6)
    (8, "B", 24, 27, 26, "nominal", "NNS"),  # the old dogs
]
# Coreferent mentions (an earlier mention of their cluster ends before they start) and what
# each system picks, worked out by hand:
# 3 they:         nearest 2 John (wrong); no head match -> none (wrong); sieve 3: only 1 "dogs" agrees -> 1
# 4 The Dogs:     nearest 3 they (right); head "dogs" (case-insensitive) -> 1; sieve 2 -> 1
# 5 John:         nearest 4 (wrong); head match -> 2; full string "john" -> 2
# 7 Mary:         6 contains it, so nearest is 5 (wrong); head match -> 0; string -> 0
# 8 the old dogs: nearest 7 (wrong); nearest head "dogs" is 6 (wrong cluster D); full string -> 1
EXPECTED = {
    "nearest": {1: 0, 2: 1, 3: 2, 4: 3, 5: 4, 6: 5, 7: 5, 8: 7},
    # only mentions with an earlier same-head mention get one: not 1, 2 or 3
    "head match": {4: 1, 5: 2, 6: 4, 7: 0, 8: 6},
    # 2 John: no string/head match; "dogs" is plural, Mary agrees -> 0.
    # 6 the dogs of Mary: nearest head "dogs" is 4.
    "rule-based": {1: 0, 2: 0, 3: 1, 4: 1, 5: 2, 6: 4, 7: 0, 8: 1},
}


def document_frames(example_id: int = 7) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(coref_mentions, words) rows of the hand-built document as one example."""
    mentions = pl.DataFrame(
        MENTIONS,
        schema={
            "mention_id": pl.Int32,
            "cluster_id": pl.String,
            "word_start": pl.Int32,
            "word_end": pl.Int32,
            "head_word": pl.Int32,
            "mention_type": pl.String,
            "head_xpos": pl.String,
        },
        orient="row",
    ).with_columns(example_id=pl.lit(example_id, dtype=pl.Int32), is_discontinuous=False)
    words = pl.DataFrame(
        {"example_id": [example_id] * len(WORDS), "word_index": range(len(WORDS)), "word": WORDS},
        schema={"example_id": pl.Int32, "word_index": pl.Int32, "word": pl.String},
    )
    return mentions, words


def test_each_baseline_picks_the_hand_worked_antecedent():
    predictions = predict_antecedents(*document_frames())
    picked = {
        system: dict(zip(rows["mention_id"], rows["antecedent_id"]))
        for (system,), rows in predictions.group_by("system")
    }
    assert picked == EXPECTED  # mention 0 has no candidate, so no prediction
    assert predictions["example_id"].unique().to_list() == [7]


def test_predictions_stay_inside_their_example():
    first, first_words = document_frames(1)
    second, second_words = document_frames(2)
    second = second.filter(pl.col("mention_id") >= 5)  # its first candidate is mention 5
    predictions = predict_antecedents(pl.concat([first, second]), pl.concat([first_words, second_words]))
    nearest = predictions.filter((pl.col("example_id") == 2) & (pl.col("system") == "nearest"))
    assert dict(zip(nearest["mention_id"], nearest["antecedent_id"])) == {6: 5, 7: 5, 8: 7}


def test_features_from_pronoun_list_and_xpos():
    mentions, words = document_frames()
    words = words.with_columns(word=pl.when(pl.col("word_index") == 9).then(pl.lit("She")).otherwise("word"))
    features = mention_features(mentions, words).sort("mention_id")
    rows = {row["mention_id"]: row for row in features.iter_rows(named=True)}
    assert (rows[3]["head"], rows[3]["number"], rows[3]["gender"], rows[3]["person"]) == (
        "she",
        "singular",
        "feminine",
        3,
    )
    assert (rows[4]["text"], rows[4]["head"], rows[4]["number"], rows[4]["gender"], rows[4]["person"]) == (
        "the dogs",
        "dogs",
        "plural",
        None,
        3,
    )
    assert (rows[0]["number"], rows[0]["gender"], rows[0]["person"]) == ("singular", None, 3)
    assert rows[6]["text"] == "the dogs of mary"


def test_unlisted_pronoun_and_missing_xpos_are_unknown():
    mentions, words = document_frames()
    mentions = mentions.drop("head_xpos").filter(pl.col("mention_id").is_in([1, 3]))
    words = words.with_columns(word=pl.when(pl.col("word_index") == 9).then(pl.lit("who")).otherwise("word"))
    rows = {row["mention_id"]: row for row in mention_features(mentions, words).iter_rows(named=True)}
    assert (rows[3]["number"], rows[3]["gender"], rows[3]["person"]) == (None, None, None)
    assert (rows[1]["number"], rows[1]["person"]) == (None, 3)


def test_nearest_candidate_ends_before_and_starts_last():
    # "[[[John]'s] dog] barked . [It]": three candidates start at John; the one that ends
    # last (closest to It) is nearest.
    words = pl.DataFrame(
        {"example_id": [0] * 6, "word_index": range(6), "word": ["John", "'s", "dog", "barked", ".", "It"]}
    )
    mentions = pl.DataFrame(
        {
            "example_id": [0, 0, 0, 0],
            "mention_id": [0, 1, 2, 3],
            "cluster_id": ["d", "j", "j2", "d"],
            "word_start": [0, 0, 0, 5],
            "word_end": [3, 1, 2, 6],
            "head_word": [2, 0, 1, 5],
            "mention_type": ["nominal", "proper", "nominal", "pronoun"],
        }
    )
    pairs = candidate_pairs(mention_features(mentions, words)).filter(pl.col("mention_id") == 3).sort("distance_rank")
    assert pairs["candidate_id"].to_list() == [0, 2, 1]
    assert pairs["distance_rank"].to_list() == [1, 2, 3]
    # Nested mentions are never candidates of each other.
    assert candidate_pairs(mention_features(mentions, words)).filter(pl.col("mention_id") < 3).is_empty()


def test_bad_input_names_the_missing_columns_and_words():
    mentions, words = document_frames()
    with pytest.raises(ValueError, match=r"coref_mentions frame lacks columns \['head_word'\]"):
        predict_antecedents(mentions.drop("head_word"), words)
    with pytest.raises(ValueError, match="mention 8 of example 7 covers word 24"):
        predict_antecedents(mentions, words.filter(pl.col("word_index") < 24))
