"""Antecedent-selection baselines of Clark et al. §4.3 (Table 2), as pure polars functions.

For every mention that has candidate antecedents, each system picks one of them:

- `nearest`: the nearest candidate;
- `head match`: the nearest candidate with the same head word (case-insensitive), else
  the nearest;
- `rule-based`: sieves in the spirit of Lee et al. (2011), as the paper describes them:
  (1) full string match, (2) head word match, (3) number/gender/person agreement,
  (4) any other mention; the nearest candidate passing the earliest sieve wins.

A candidate antecedent of a mention is a mention of the same example that ends before the
mention starts (so a mention never links to one that contains or overlaps it); "nearest"
is the candidate that starts last, then the one that ends last (the last in mentions
ordered by start and end). The views in
`sql/intermediate/int_coref_antecedents.sql` use the same rule for the gold antecedents.
"""

import polars as pl

from dagster_project.corpora.coreference import PRONOUNS

# Penn Treebank noun tags (the head word's XPOS) -> number.
_NOUN_NUMBER = {"NN": "singular", "NNP": "singular", "NNS": "plural", "NNPS": "plural"}

_MENTION_COLUMNS = ("example_id", "mention_id", "word_start", "word_end", "head_word", "mention_type")
_WORD_COLUMNS = ("example_id", "word_index", "word")


def _require(frame: pl.DataFrame, columns: tuple[str, ...], name: str) -> None:
    missing = [column for column in columns if column not in frame.columns]
    if missing:
        raise ValueError(
            f"{name} frame lacks columns {missing}; pass the warehouse `{name}` table's rows (it has {frame.columns})."
        )


def mention_features(mentions: pl.DataFrame, words: pl.DataFrame) -> pl.DataFrame:
    """The mentions with their lower-cased full text and head word, and number, gender and
    person (from the pronoun list, else number from the head's XPOS and 3rd person for
    non-pronouns; null when unknown).

    `mentions` has the `coref_mentions` columns (`head_xpos` optional), `words` those of
    the `words` table.
    """
    _require(mentions, _MENTION_COLUMNS, "coref_mentions")
    _require(words, _WORD_COLUMNS, "words")
    if "head_xpos" not in mentions.columns:
        mentions = mentions.with_columns(head_xpos=pl.lit(None, dtype=pl.String))
    forms = words.select("example_id", "word_index", form=pl.col("word").str.to_lowercase())
    spans = (
        mentions.select("example_id", "mention_id", word_index=pl.int_ranges("word_start", "word_end"))
        .explode("word_index")
        .join(forms, on=["example_id", "word_index"], how="left")
    )
    missing = spans.filter(pl.col("form").is_null())
    if missing.height:
        row = missing.row(0, named=True)
        raise ValueError(
            f"mention {row['mention_id']} of example {row['example_id']} covers word {row['word_index']}, "
            "which the words frame lacks; read mentions and words of the same (model, corpus) partition."
        )
    texts = spans.sort("word_index").group_by("example_id", "mention_id").agg(text=pl.col("form").str.join(" "))
    lexicon = pl.DataFrame(
        [(form, *attributes) for form, attributes in PRONOUNS.items()],
        schema={"head": pl.String, "number": pl.String, "gender": pl.String, "person": pl.Int8},
        orient="row",
    )
    return (
        mentions.join(texts, on=["example_id", "mention_id"])
        .join(forms.rename({"word_index": "head_word", "form": "head"}), on=["example_id", "head_word"], how="left")
        .join(lexicon, on="head", how="left")
        .with_columns(
            number=pl.coalesce(
                "number", pl.col("head_xpos").replace_strict(_NOUN_NUMBER, default=None, return_dtype=pl.String)
            ),
            person=pl.coalesce("person", pl.when(pl.col("mention_type") != "pronoun").then(pl.lit(3, dtype=pl.Int8))),
        )
    )


def _agree(attribute: str) -> pl.Expr:
    """Compatible values: equal, or either unknown."""
    return (
        pl.col(attribute).is_null()
        | pl.col(f"{attribute}_candidate").is_null()
        | (pl.col(attribute) == pl.col(f"{attribute}_candidate"))
    )


def candidate_pairs(features: pl.DataFrame) -> pl.DataFrame:
    """Every (mention, candidate antecedent) pair with `distance_rank` (1 = nearest) and the
    candidate's features suffixed `_candidate`."""
    candidates = features.select(
        "example_id",
        candidate_id="mention_id",
        **{
            f"{column}_candidate": column
            for column in ("word_start", "word_end", "text", "head", "number", "gender", "person")
        },
    )
    pairs = features.join(candidates, on="example_id").filter(pl.col("word_end_candidate") <= pl.col("word_start"))
    return pairs.with_columns(
        distance_rank=pl.struct(start=-pl.col("word_start_candidate"), end=-pl.col("word_end_candidate"))
        .rank("ordinal")
        .over("example_id", "mention_id")
    )


def predict_antecedents(mentions: pl.DataFrame, words: pl.DataFrame) -> pl.DataFrame:
    """Per (example, mention, system) the predicted antecedent's mention_id, for the mentions the
    system finds a candidate for: nearest and rule-based for every mention with an earlier one,
    head match only for those with an earlier one of the same head word."""
    pairs = candidate_pairs(mention_features(mentions, words))
    head_match = pl.col("head") == pl.col("head_candidate")
    sieve = (
        pl.when(pl.col("text") == pl.col("text_candidate"))
        .then(1)
        .when(head_match)
        .then(2)
        .when(_agree("number") & _agree("gender") & _agree("person"))
        .then(3)
        .otherwise(4)
    )
    # Each system ranks the candidates it considers by (its own preference, distance) and keeps
    # the first. Head match considers only candidates with the mention's head word (Clark §4.3:
    # "the nearest other mention with the same head word"): a mention with none gets no
    # prediction, and the accuracy counts it wrong.
    considered = {
        "nearest": (pairs, pl.lit(0)),
        "head match": (pairs.filter(head_match), pl.lit(0)),
        "rule-based": (pairs, sieve),
    }
    predictions = [
        candidates.with_columns(preference=expression)
        .sort("preference", "distance_rank")
        .group_by("example_id", "mention_id", maintain_order=True)
        .agg(antecedent_id=pl.col("candidate_id").first())
        .with_columns(system=pl.lit(system))
        for system, (candidates, expression) in considered.items()
    ]
    return (
        pl.concat(predictions)
        .select("example_id", "mention_id", "system", pl.col("antecedent_id").cast(pl.Int32))
        .sort("example_id", "mention_id", "system")
    )
