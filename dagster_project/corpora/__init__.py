"""Corpora: readers for every stand-in corpus of docs/methods.md §2, and how each is sampled.

`CORPORA` is the registry the assets are built from: one `<name>_examples` asset per
corpus, and one `<name>_attention_facts` asset per corpus analysed for attention.
"""

from collections.abc import Callable
from functools import partial
from pathlib import Path

from dagster_project.corpora.base import (
    DOCUMENT_OVERLONG,
    OVERLONG,
    CorpusData,
    CorpusError,
    CorpusSpec,
    join_words,
    split_words,
)
from dagster_project.corpora.conllu_corpora import read_ud
from dagster_project.corpora.coreference import (
    gap_files,
    ontogum_files,
    prepare_documents,
    read_conll2012,
    read_gap,
    read_ontogum,
    truncate_documents,
    window_documents,
)
from dagster_project.corpora.encoding import EncodedCorpus, align_words, encode_corpus, punctuation_ids
from dagster_project.corpora.framenet import read_framenet
from dagster_project.corpora.text_pairs import (
    GLUE_TASKS,
    detokenize_wikitext,
    glue_files,
    read_demo_pairs,
    read_glue,
    read_wikitext_pairs,
    read_xnli_pairs,
)

WIKITEXT_FILE = "wikipedia/wikitext2_raw_wiki.test.raw"
CONLL2012_FILE = "conll2012/dev.english.v4_gold_conll"
FRAMENET_FILES = (
    "framenet17/fn1.7.dev.syntaxnet.conll",
    "framenet17/fn1.7.test.syntaxnet.conll",
    "framenet17/frame_coreFE_list.json",
)
# Kovaleva §4.4-4.5 and Fig. 2 facts of the GLUE validation corpora (and the demo).
KOVALEVA_FACTS = ("received_attention", "feature_pair_attention", "pattern_example_maps")
# Clark Figs. 1 and 5: every head's whole map for the first few examples (Wikipedia segments,
# the Table 1 treebank split, the Table 2 coreference corpus).
CLARK_MAPS = "head_example_maps"
UD_FILES = {"ewt": "ud_english_ewt/en_ewt-ud-{split}.conllu", "gum": "ud_english_gum/en_gum-ud-{split}.conllu"}


def _annotated(
    name: str, description: str, files: tuple[str, ...], read: Callable[[Path], CorpusData], **options
) -> CorpusSpec:
    """A corpus analysed word by word against its gold annotations: every example that fits
    (128 pieces unless given), relation hits instead of position histograms, not in the
    default run."""
    return CorpusSpec(
        name=name,
        description=description,
        files=files,
        read=read,
        **{"max_len": 128, "size": None, "fact_kinds": ("relation_hits",), "default": False, **options},
    )


def _ud(treebank: str, split: str) -> CorpusSpec:
    file = UD_FILES[treebank].format(split=split)
    name = f"ud_{treebank}_{split}"
    return _annotated(
        name,
        f"UD English {treebank.upper()} {split}: gold UPOS/XPOS, heads and relations (Clark §4-5).",
        (file,),
        lambda data_dir: read_ud([data_dir / file]),
        annotations=("dependencies",),
        **({"fact_kinds": ("relation_hits", CLARK_MAPS)} if name == "ud_ewt_test" else {}),
    )


def _glue(task: str, split: str) -> CorpusSpec:
    validation = split == "validation"
    return CorpusSpec(
        name=f"glue_{task}" if validation else f"glue_{task}_{split}",
        description=f"GLUE {task.upper()} {split} (HF parquet, or GLUE-style TSV)."
        + ("" if GLUE_TASKS[task].kovaleva else " Not one of Kovaleva's tasks: processed only when named."),
        files=(glue_files(task, split),),
        read=partial(read_glue, task=task, split=split),
        max_len=128,
        size=1000 if validation else None,
        # Kovaleva Figs. 2, 5-7: a BERT classifier truncates what is over its length, so the
        # attention is read on every example as the classifier sees it (drop: run config overlong)
        overlong="truncate",
        spacy_features=validation,
        default=False,
        outside_papers=not GLUE_TASKS[task].kovaleva,
        fact_kinds=KOVALEVA_FACTS if validation else None,
    )


# Pascual Fig. 4's languages: corpora xnli_<language>; models.toml's `language` names one of them.
XNLI_LANGUAGES = ("en", "de", "ar")


def _xnli(language: str) -> CorpusSpec:
    return CorpusSpec(
        name=f"xnli_{language}",
        description=(
            f"Pascual: XNLI {language} premise/hypothesis pairs (stand-in for MNLI-m dev); ids shared across languages."
        ),
        files=tuple(f"xnli/xnli_{split}_{language}.tsv" for split in ("validation", "test")),
        read=partial(read_xnli_pairs, language=language),
        max_len=64,  # the paper's fixed cap (run config max_len: 64); by default d_head
        max_len_is_d_head=True,
        size=1800,
        spacy_features=language == "en",
        default=language == "en",
        hta=True,
    )


_SPECS = [
    CorpusSpec(
        name="demo",
        description="Built-in sentence pairs shipped with the project (no data directory needed).",
        files=(),
        read=read_demo_pairs,
        max_len=128,
        size=1000,
        spacy_features=True,
        outside_papers=True,
        hta=True,
        fact_kinds=("position_histograms", *KOVALEVA_FACTS),
    ),
    CorpusSpec(
        name="wiki_segments",
        description="Clark §3: consecutive same-section WikiText paragraph pairs, [CLS] p1 [SEP] p2 [SEP].",
        files=(WIKITEXT_FILE,),
        read=lambda data_dir: read_wikitext_pairs(data_dir / WIKITEXT_FILE),
        max_len=128,
        size=1000,
        overlong="truncate",  # Clark §3: "most segments are 128 tokens"
        spacy_features=True,
        fact_kinds=("position_histograms", "head_distances", CLARK_MAPS),
    ),
    *(_xnli(language) for language in XNLI_LANGUAGES),
    *(_ud(treebank, split) for treebank in UD_FILES for split in ("dev", "test")),
    _annotated(
        "ontogum",
        "Clark §4.3: OntoGUM coreference (OntoNotes scheme), each document truncated to its first 128 pieces "
        "(overlong=windows: sentence windows).",
        ("gum_coref/ontogum_conllu/GUM_bio_byron.conllu",),
        # The staged OntoGUM has a few unbalanced brackets: skipped and reported, not fatal.
        lambda data_dir: read_ontogum(ontogum_files(data_dir), strict=False),
        annotations=("coref_mentions", "coref_clusters"),
        prepare=prepare_documents,
        overlong="truncate",  # Clark §4.3 footnote 4: "We truncate documents to 128 tokens long"
        # Kovaleva §4.5 pairs: noun -> pronoun needs gold coreference, verb -> subject spaCy
        spacy_features=True,
        fact_kinds=("relation_hits", "feature_pair_attention", CLARK_MAPS),
    ),
    _annotated(
        "conll2012",
        "CoNLL-2012 coreference (OntoNotes), for users who have it: conll2012/dev.english.v4_gold_conll.",
        (CONLL2012_FILE,),
        lambda data_dir: read_conll2012(data_dir / CONLL2012_FILE),
        annotations=("coref_mentions", "coref_clusters"),
        prepare=prepare_documents,
        overlong="truncate",  # Clark §4.3 footnote 4: "We truncate documents to 128 tokens long"
    ),
    *(
        _annotated(
            f"gap_{split}",
            f"GAP {split}: gendered pronoun, two name candidates, gold coreference flags.",
            (gap_files(split),),
            lambda data_dir, split=split: read_gap(data_dir / gap_files(split)),
            annotations=("coref_mentions",),
            max_len=512,
        )
        for split in ("development", "validation", "test")
    ),
    _annotated(
        "framenet",
        "Kovaleva §4.2: FrameNet 1.7 full-text dev+test sentences of <= 12 words with LU -> core FE links.",
        FRAMENET_FILES,
        lambda data_dir: read_framenet([data_dir / name for name in FRAMENET_FILES[:2]], data_dir / FRAMENET_FILES[2]),
        annotations=("frame_links",),
        fact_kinds=("relation_hits", "frame_link_attention"),
    ),
    *(_glue(task, "validation") for task in GLUE_TASKS),
    *(_glue(task, "train") for task in GLUE_TASKS if task != "qnli"),  # QNLI train is not staged
]
CORPORA: dict[str, CorpusSpec] = {spec.name: spec for spec in _SPECS}
DEFAULT_CORPORA = tuple(name for name, spec in CORPORA.items() if spec.default)  # `attn-warehouse run` without --corpus
PAPER_CORPORA = tuple(name for name, spec in CORPORA.items() if not spec.outside_papers)  # `--corpus all`


def present_corpora(data_dir: Path) -> list[str]:
    """The corpora whose files are all in `data_dir` (the built-in demo always is)."""
    return [name for name, spec in CORPORA.items() if not spec.missing_files(data_dir)]


__all__ = [
    "CORPORA",
    "DEFAULT_CORPORA",
    "PAPER_CORPORA",
    "XNLI_LANGUAGES",
    "DOCUMENT_OVERLONG",
    "OVERLONG",
    "present_corpora",
    "GLUE_TASKS",
    "CorpusData",
    "CorpusError",
    "CorpusSpec",
    "EncodedCorpus",
    "align_words",
    "detokenize_wikitext",
    "encode_corpus",
    "join_words",
    "punctuation_ids",
    "read_conll2012",
    "read_demo_pairs",
    "read_framenet",
    "read_gap",
    "read_ontogum",
    "prepare_documents",
    "truncate_documents",
    "window_documents",
    "read_glue",
    "read_ud",
    "read_wikitext_pairs",
    "read_xnli_pairs",
    "split_words",
]
