"""Attention fact assets, one per corpus analysed for attention: a single forward pass per
(model, corpus) writes the table of every fact kind the corpus gets (compute.fact_kinds) for
that partition in one transaction, and evaluates the kinds' checks on what it computed."""

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

import polars as pl
from dagster import (
    AssetCheckResult,
    AssetChecksDefinition,
    AssetCheckSeverity,
    AssetExecutionContext,
    AssetsDefinition,
    Config,
    MaterializeResult,
    MetadataValue,
    asset_check,
)
from dagster_duckdb import DuckDBResource

from dagster_project.compute.attention_facts import FRAME_LINK_COLUMNS, MENTION_COLUMNS, feature_pair_links
from dagster_project.compute.attention_pass import CheckedAttentionFacts, checked_attention_facts
from dagster_project.compute.batching import WORD_FEATURES
from dagster_project.compute.fact_kinds import (
    ALWAYS,
    FACT_KINDS,
    FRAME_LINKS,
    SPACY_FEATURES,
    WORDS,
    FactKind,
    corpus_fact_kinds,
    figure_5_examples,
    kind_checks,
)
from dagster_project.compute.metrics import WORD_MODES, PatternThresholds
from dagster_project.compute.models import LoadedEncoder, load_encoder
from dagster_project.compute.weightings import check_weightings
from dagster_project.corpora import CORPORA, CorpusSpec
from dagster_project.defs.assets.corpora import corpus_assets_by_name, examples_read, model_tokens
from dagster_project.defs.assets.writing import model_partition_asset, progress_logger, write_partition
from dagster_project.defs.resources import ComputeResource
from dagster_project.defs.tags import corpus_tags
from dagster_project.presentation.consistency import facts_of_replaced_examples, replaced_examples_lines
from dagster_project.storage.batches import partition_rows


class FactsConfig(Config):
    batch_tokens: int | None = None  # padded positions per forward batch; None: the device's default
    word_mode: str = "mean"  # a split word's row from its pieces' rows: mean | first (released code) | max
    # Kovaleva pattern-class rules (metrics.pattern_classes), recorded in the metadata.
    pattern_vertical: float = PatternThresholds.vertical  # mean row mass to [CLS] + [SEP] (+ '.'/',')
    # whether '.'/',' columns count toward the vertical mass (the default: Kovaleva judged stripes by eye)
    pattern_vertical_punctuation: bool = PatternThresholds.vertical_punctuation
    pattern_diagonal: float = PatternThresholds.diagonal  # mean row mass to previous + next token
    pattern_block: float = PatternThresholds.block  # mean content-row mass within its own segment
    pattern_mixed: float = PatternThresholds.mixed  # vertical+diagonal: at least this on both (0.5: both thresholds)
    # the maps the weighted kinds are also taken on (compute/weightings.py WEIGHTINGS, docs/methods.md §3.9):
    # attention alone by default; norm also writes value_norms
    weightings: list[str] = ["attention"]


def owned_tables(kinds: Sequence[FactKind]) -> list[str]:
    """Every table a pass of a corpus with `kinds` owns, whatever its weightings: its kinds', the
    always-written ones and those written only with the norm weighting. A pass replaces each of
    them, an empty one included, so no earlier pass's rows (value_norms of a pass with norm) outlive it."""
    norm_kinds = [kind for kind in FACT_KINDS.values() if kind.reads_norms]
    return sorted({*ALWAYS, *(kind.table for kind in (*kinds, *norm_kinds))})


def _pass_rows(
    warehouse: DuckDBResource, model_id: str, spec: CorpusSpec, kinds: Sequence[FactKind]
) -> tuple[pl.DataFrame | None, pl.DataFrame | None, pl.DataFrame | None]:
    """What the corpus's `kinds` read besides tokens, from the warehouse: its words (with their
    spaCy features), Kovaleva's feature-pair links and its frame links; None where no kind reads them."""
    needs = frozenset().union(*(kind.needs for kind in kinds))
    corpus = spec.name
    words = frame_links = feature_links = None
    with warehouse.get_connection() as conn:
        if WORDS in needs:
            words = partition_rows(
                conn, "words", model_id, corpus, ("example_id", "word_index", "piece_start", "piece_end")
            )
        if SPACY_FEATURES in needs:
            features = partition_rows(
                conn,
                "word_features",
                model_id,
                corpus,
                ("example_id", "word_index", "head_word_index", *WORD_FEATURES),
            )
            words = words.join(features, on=["example_id", "word_index"], how="left")
        if "feature_pair_attention" in {kind.table for kind in kinds}:
            mentions = (
                partition_rows(conn, "coref_mentions", model_id, corpus, MENTION_COLUMNS)
                if "coref_mentions" in spec.provides
                else None
            )
            feature_links = feature_pair_links(words, mentions)
        if FRAME_LINKS in needs:
            frame_links = partition_rows(
                conn, "frame_links", model_id, corpus, ("example_id", *FRAME_LINK_COLUMNS)
            ).unique(maintain_order=True)
    return words, feature_links, frame_links


def _figure_examples(
    warehouse: DuckDBResource, model_id: str, spec: CorpusSpec, kinds: Sequence[FactKind]
) -> tuple[int, ...]:
    """The examples whose whole maps Clark Fig. 5 needs besides the first ones (figure_5_examples),
    from the corpus's gold dependencies and coreference mentions; none without head_example_maps."""
    if "head_example_maps" not in {kind.table for kind in kinds}:
        return ()
    with warehouse.get_connection() as conn:

        def gold(table: str, columns: tuple[str, ...]) -> pl.DataFrame | None:
            return partition_rows(conn, table, model_id, spec.name, columns) if table in spec.provides else None

        return figure_5_examples(
            gold("dependencies", ("example_id", "relation", "upos")),
            gold("coref_mentions", ("example_id", "cluster_id", "word_start", "word_end")),
        )


def _pass_metadata(
    checked: CheckedAttentionFacts,
    encoder: LoadedEncoder,
    word_mode: str,
    thresholds: PatternThresholds,
    weightings: tuple[str, ...],
) -> dict[str, Any]:
    facts = checked.facts
    return {
        "examples": facts.n_examples,
        "device": str(encoder.compute),
        "weightings": ", ".join(weightings),
        **({"word_mode": word_mode} if "relation_hits" in facts.tables else {}),
        "pattern_thresholds": MetadataValue.json(asdict(thresholds)),
        "pattern_shares": MetadataValue.json(checked.pattern_shares),
        "seconds": round(facts.seconds, 2),
        "examples_per_second": round(facts.n_examples / facts.seconds, 1),
        "max_row_sum_error": MetadataValue.float(checked.max_row_sum_error),
    }


def build_fact_asset(spec: CorpusSpec, corpus_asset: AssetsDefinition) -> AssetsDefinition:
    corpus = spec.name
    name = f"{corpus}_attention_facts"
    kinds = corpus_fact_kinds(spec)
    tables = ", ".join(f"`{kind.table}`" for kind in kinds)

    @model_partition_asset(
        name,
        description=f"Per-example, per-head attention facts of the '{corpus}' corpus (docs/methods.md §3): {tables}.",
        deps=[corpus_asset],
        group_name="facts",
        tags=corpus_tags(corpus, "attention"),
        checks={check.name: check.description for check in kind_checks(kinds)},
    )
    def fact_asset(
        context: AssetExecutionContext, config: FactsConfig, warehouse: DuckDBResource, compute: ComputeResource
    ) -> MaterializeResult:
        model_id = context.partition_key
        if config.word_mode not in WORD_MODES:
            raise ValueError(f"{name}: run config word_mode must be one of {WORD_MODES}, got '{config.word_mode}'")
        try:
            weightings = check_weightings(config.weightings)
        except ValueError as error:
            raise ValueError(f"{name}: run config weightings: {error}") from None
        examples = examples_read(context, warehouse, [corpus])
        source, tokens = model_tokens(warehouse, model_id, corpus)
        words, feature_links, frame_links = _pass_rows(warehouse, model_id, spec, kinds)
        thresholds = PatternThresholds(
            vertical=config.pattern_vertical,
            diagonal=config.pattern_diagonal,
            block=config.pattern_block,
            mixed=config.pattern_mixed,
            vertical_punctuation=config.pattern_vertical_punctuation,
        )
        encoder = load_encoder(source, compute.resolve())
        checked = checked_attention_facts(
            encoder,
            tokens,
            kinds,
            words,
            frame_links=frame_links,
            feature_links=feature_links,
            word_mode=config.word_mode,
            thresholds=thresholds,
            batch_tokens=config.batch_tokens,
            progress=progress_logger(context, corpus),
            weightings=weightings,
            figure_examples=_figure_examples(warehouse, model_id, spec, kinds),
        )
        return write_partition(
            context,
            warehouse,
            {table: pl.DataFrame() for table in owned_tables(kinds)} | checked.facts.tables,
            corpus,
            checked.outcomes,
            _pass_metadata(checked, encoder, config.word_mode, thresholds, weightings),
            checked.facts.tables["head_summaries"],
            examples,
        )

    return fact_asset


fact_assets_by_corpus = {
    name: build_fact_asset(CORPORA[name], asset)
    for name, asset in corpus_assets_by_name.items()
    if CORPORA[name].attention
}
fact_assets = list(fact_assets_by_corpus.values())


def build_facts_match_examples(corpus: str, fact_asset: AssetsDefinition) -> AssetChecksDefinition:
    """The check that every model's facts of `corpus` were computed from the examples the warehouse
    holds (int_facts_of_replaced_examples has no row of it); run on demand and after the facts in a
    job, not blocking: it reads the warehouse as it is, whichever run left it so."""

    @asset_check(
        asset=fact_asset,
        name="facts_match_examples",
        description=f"Every model's {corpus} facts were computed from the {corpus} examples the warehouse holds "
        "(a run that sampled them anew and failed before its facts leaves them mixed).",
    )
    def facts_match_examples(warehouse: DuckDBResource) -> AssetCheckResult:
        with warehouse.get_connection() as conn:
            rows = facts_of_replaced_examples(conn, corpus)
        return AssetCheckResult(
            passed=rows.is_empty(),
            severity=AssetCheckSeverity.ERROR,
            description="; ".join(replaced_examples_lines(rows)) or None,
            metadata={
                "mixed_models": rows.height,
                "fix": MetadataValue.md("\n".join(f"`{fix}`" for fix in rows["fix"])),
            },
        )

    return facts_match_examples


fact_asset_checks = [build_facts_match_examples(corpus, asset) for corpus, asset in fact_assets_by_corpus.items()]
