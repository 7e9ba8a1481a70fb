"""Attention fact assets: one forward pass per (model, corpus) writes `head_summaries` and
`position_histograms` for that partition in one transaction."""

from dataclasses import asdict

from dagster import AssetExecutionContext, AssetsDefinition, Config, MaterializeResult, MetadataValue, asset
from dagster_duckdb import DuckDBResource

from dagster_project.compute.attention_facts import (
    DEFAULT_BATCH_TOKENS,
    FRAME_LINK_COLUMNS,
    WORD_FEATURES,
    extract_attention_facts,
)
from dagster_project.compute.checks import (
    finite,
    frame_link_bounds,
    histogram_masses,
    received_sums_to_one,
    relation_hit_targets,
    rows_per_example,
    rows_sum_to_one,
)
from dagster_project.compute.metrics import WORD_MODES, PatternThresholds
from dagster_project.compute.models import load_encoder
from dagster_project.corpora import CORPORA, CorpusSpec
from dagster_project.defs.assets.checks import check_result, fact_check_specs
from dagster_project.defs.assets.corpora import corpus_assets_by_name, model_tokens
from dagster_project.defs.assets.metadata import progress_logger, table_preview
from dagster_project.defs.partitions import model_partitions
from dagster_project.defs.tags import corpus_tags
from dagster_project.storage.warehouse import partition_rows, replace_partition

_PROGRESS_EVERY_SECONDS = 10.0


class FactsConfig(Config):
    batch_tokens: int = DEFAULT_BATCH_TOKENS  # padded positions per forward batch
    word_mode: str = "mean"  # a split word's row from its pieces' rows: mean | first (released code) | max
    # Kovaleva pattern-class rules (metrics.pattern_classes), recorded in the metadata.
    pattern_vertical: float = PatternThresholds.vertical  # mean row mass to [CLS] + [SEP]
    pattern_diagonal: float = PatternThresholds.diagonal  # mean row mass to previous + next token
    pattern_block: float = PatternThresholds.block  # mean content-row mass within its own segment


FACT_CHECKS = {
    "rows_sum_to_one": "Every attention row sums to 1 (max error <= 1e-4).",
    "histogram_pairs_and_mass": "Per example and head: histogram pair counts sum to n^2 and weights to n.",
    "finite_values": "No NaN or inf in the head summaries and histogram weights.",
    "rows_per_example": "One head-summary row per (example, layer, head).",
    "relation_hit_targets": "Relation-hit targets are other words of the same example; one hit per word, layer and head.",
    "finite_head_distances": "Every head-pair Jensen-Shannon sum is finite.",
    "received_sums_to_one": "Per example and head, received attention (column sums / n) and the [CLS] row each sum to 1 over tokens.",
    "frame_link_bounds": "Every frame link has one finite max attention in [0, 1] per (layer, head).",
}


def build_fact_asset(spec: CorpusSpec, corpus_asset: AssetsDefinition) -> AssetsDefinition:
    corpus = spec.name
    name = f"{corpus}_attention_facts"
    skipped = {
        "histogram_pairs_and_mass": not spec.histograms,
        "relation_hit_targets": not spec.relation_hits,
        "finite_head_distances": not spec.head_distances,
        "received_sums_to_one": not spec.received_attention,
        "frame_link_bounds": not spec.frame_link_attention,
    }
    checks = {name: text for name, text in FACT_CHECKS.items() if not skipped.get(name)}

    @asset(
        name=name,
        description=f"Per-example, per-head attention facts of the '{corpus}' corpus (METHODS §3).",
        partitions_def=model_partitions,
        deps=[corpus_asset],
        group_name="facts",
        tags=corpus_tags(corpus, "attention"),
        pool="warehouse_writer",
        check_specs=fact_check_specs(name, checks),
    )
    def fact_asset(context: AssetExecutionContext, config: FactsConfig, warehouse: DuckDBResource) -> MaterializeResult:
        model_id = context.partition_key
        if config.word_mode not in WORD_MODES:
            raise ValueError(f"{name}: run config word_mode must be one of {WORD_MODES}, got '{config.word_mode}'")
        source, tokens = model_tokens(warehouse, model_id, corpus)
        words = frame_links = None
        word_columns = ("example_id", "word_index", "piece_start", "piece_end")
        with warehouse.get_connection() as conn:
            if spec.relation_hits or spec.frame_link_attention or (spec.received_attention and spec.spacy_features):
                words = partition_rows(conn, "words", model_id, corpus, word_columns)
            if spec.received_attention and spec.spacy_features:
                features = partition_rows(
                    conn, "word_features", model_id, corpus, ("example_id", "word_index", *WORD_FEATURES)
                )
                words = words.join(features, on=["example_id", "word_index"], how="left")
            if spec.frame_link_attention:
                frame_links = partition_rows(
                    conn, "frame_links", model_id, corpus, ("example_id", *FRAME_LINK_COLUMNS)
                ).unique(maintain_order=True)
        thresholds = PatternThresholds(config.pattern_vertical, config.pattern_diagonal, config.pattern_block)
        report = progress_logger(context, corpus, _PROGRESS_EVERY_SECONDS)
        encoder = load_encoder(source)
        facts = extract_attention_facts(
            encoder,
            tokens,
            config.batch_tokens,
            report,
            spec.histograms,
            words,
            config.word_mode,
            spec.head_distances,
            relation_hits=spec.relation_hits,
            received=spec.received_attention,
            frame_links=frame_links,
            pattern_examples=spec.pattern_examples,
            thresholds=thresholds,
        )
        summaries = facts.head_summaries
        outcomes = [
            rows_sum_to_one(summaries),
            finite(summaries, ["to_cls", "to_sep", "to_self", "entropy", "row_sum_error"]),
            rows_per_example(summaries, tokens["example_id"].n_unique(), encoder.spec.n_layers * encoder.spec.n_heads),
        ]
        if spec.histograms:
            lengths = summaries.select("example_id", "n_tokens").unique()
            outcomes.append(
                histogram_masses(
                    facts.position_histograms,
                    lengths,
                    "histogram_pairs_and_mass",
                    FACT_CHECKS["histogram_pairs_and_mass"],
                )
            )
        tables = {"head_summaries": facts.head_summaries}
        if spec.histograms:
            tables["position_histograms"] = facts.position_histograms
        if spec.relation_hits:
            outcomes.append(
                relation_hit_targets(facts.relation_hits, words, encoder.spec.n_layers * encoder.spec.n_heads)
            )
            tables["relation_hits"] = facts.relation_hits
        if spec.head_distances:
            outcomes.append(finite(facts.head_distances, ["js_sum"], "finite_head_distances"))
            tables["head_distances"] = facts.head_distances
        if spec.received_attention:
            outcomes.append(received_sums_to_one(facts.received_attention))
            tables["received_attention"] = facts.received_attention
            tables["feature_pair_attention"] = facts.feature_pair_attention
        if spec.frame_link_attention:
            outcomes.append(frame_link_bounds(facts.frame_link_attention))
            tables["frame_link_attention"] = facts.frame_link_attention
        if spec.pattern_examples:
            tables["pattern_example_maps"] = facts.pattern_example_maps
        with warehouse.get_connection() as conn:
            written = replace_partition(conn, tables, model_id, corpus)
        return MaterializeResult(
            metadata={
                **{f"{table}_rows": rows for table, rows in written.items()},
                "examples": facts.n_examples,
                **({"word_mode": config.word_mode} if spec.relation_hits else {}),
                "pattern_thresholds": MetadataValue.json(asdict(thresholds)),
                "pattern_shares": MetadataValue.json(
                    {
                        row["pattern"]: round(row["share"], 4)
                        for row in summaries["pattern"].value_counts(normalize=True, name="share").iter_rows(named=True)
                    }
                ),
                "seconds": round(facts.seconds, 2),
                "examples_per_second": round(facts.n_examples / facts.seconds, 1),
                "max_row_sum_error": MetadataValue.float(float(facts.head_summaries["row_sum_error"].max())),
                "preview": table_preview(facts.head_summaries),
            },
            check_results=[check_result(outcome) for outcome in outcomes],
        )

    return fact_asset


fact_assets_by_corpus = {
    name: build_fact_asset(CORPORA[name], asset)
    for name, asset in corpus_assets_by_name.items()
    if CORPORA[name].attention
}
fact_assets = list(fact_assets_by_corpus.values())
