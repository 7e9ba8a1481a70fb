"""spaCy annotation of corpus words: alignment records and the Kovaleva feature flags."""

import polars as pl

from dagster_project.corpora import split_words
from dagster_project.corpora.annotation import negation_flags, spacy_features


def test_features_and_alignment_of_a_small_pair():
    examples = pl.DataFrame({"example_id": [1], "text_a": ["I didn't see the cat."], "text_b": ["Nobody came."]})
    words = split_words(examples)
    features = spacy_features(examples, words).sort("word_index")
    assert features["word_index"].to_list() == list(range(9))
    by_word = dict(zip(words["word"], features.iter_rows(named=True)))
    assert by_word["didn't"]["spacy_alignment"] == "split"  # spaCy: did + n't
    assert by_word["didn't"]["spacy_tokens"] == "did n't"
    assert by_word["didn't"]["is_negation"] and not by_word["see"]["is_negation"]
    assert by_word["I"]["is_subject"] and by_word["I"]["is_pronoun"]
    assert by_word["cat"]["is_noun"] and by_word["cat"]["is_object"]
    assert by_word["see"]["is_verb"] and by_word["see"]["spacy_alignment"] == "exact"
    # Heads are corpus word indices of the same segment: "the" -> "cat", "I" -> "see".
    assert by_word["the"]["head_word_index"] == 4 and by_word["I"]["head_word_index"] == 2
    assert by_word["Nobody"]["head_word_index"] == 7  # second segment: "came" is word 7


def test_negation_words_in_tokenized_text():
    # SST-2 style: contractions split in two words. "do n't" and "ca n't" spell listed words (both
    # halves flagged), "does n't" spells "doesn't", which the paper's list does not have; a "n't"
    # opening the second segment has no word before it there.
    examples = pl.DataFrame(
        {"example_id": [1], "text_a": ["I do n't know , it does n't , ca n't"], "text_b": ["n't Nothing"]}
    )
    words = split_words(examples)
    flagged = negation_flags(words).join(words, on=["example_id", "word_index"]).sort("word_index")
    assert flagged.filter("is_negation")["word_index"].to_list() == [1, 2, 9, 10, 12]
    assert flagged.filter("is_negation")["word"].to_list() == ["do", "n't", "ca", "n't", "Nothing"]
