"""Attention fact assets: one forward pass per (model, corpus) writes `head_summaries` and
`position_histograms` for that partition in one transaction."""

from dagster import AssetExecutionContext, AssetsDefinition, Config, MaterializeResult, MetadataValue, asset
from dagster_duckdb import DuckDBResource

from dagster_project.assets.corpora import corpus_assets_by_name, model_tokens
from dagster_project.assets.checks import check_result, fact_check_specs
from dagster_project.assets.metadata import progress_logger, table_preview
from dagster_project.checks import finite, histogram_masses, relation_hit_targets, rows_per_example, rows_sum_to_one
from dagster_project.corpora import CORPORA, CorpusSpec
from dagster_project.facts import DEFAULT_BATCH_TOKENS, extract_attention_facts
from dagster_project.metrics import WORD_MODES
from dagster_project.models import load_encoder
from dagster_project.partitions import model_partitions
from dagster_project.warehouse import partition_rows, replace_partition

_PROGRESS_EVERY_SECONDS = 10.0


class FactsConfig(Config):
    batch_tokens: int = DEFAULT_BATCH_TOKENS  # padded positions per forward batch
    word_mode: str = "mean"  # a split word's row from its pieces' rows: mean | first (released code) | max


FACT_CHECKS = {
    "rows_sum_to_one": "Every attention row sums to 1 (max error <= 1e-4).",
    "histogram_pairs_and_mass": "Per example and head: histogram pair counts sum to n^2 and weights to n.",
    "finite_values": "No NaN or inf in the head summaries and histogram weights.",
    "rows_per_example": "One head-summary row per (example, layer, head).",
    "relation_hit_targets": "Relation-hit targets are other words of the same example; one hit per word, layer and head.",
    "finite_head_distances": "Every head-pair Jensen-Shannon sum is finite.",
}


def build_fact_asset(spec: CorpusSpec, corpus_asset: AssetsDefinition) -> AssetsDefinition:
    corpus = spec.name
    name = f"{corpus}_attention_facts"
    skipped = {
        "histogram_pairs_and_mass": not spec.histograms,
        "relation_hit_targets": not spec.relation_hits,
        "finite_head_distances": not spec.head_distances,
    }
    checks = {name: text for name, text in FACT_CHECKS.items() if not skipped.get(name)}

    @asset(
        name=name,
        description=f"Per-example, per-head attention facts of the '{corpus}' corpus (METHODS §3).",
        partitions_def=model_partitions,
        deps=[corpus_asset],
        group_name="facts",
        pool="warehouse_writer",
        check_specs=fact_check_specs(name, checks),
    )
    def fact_asset(context: AssetExecutionContext, config: FactsConfig, warehouse: DuckDBResource) -> MaterializeResult:
        model_id = context.partition_key
        if config.word_mode not in WORD_MODES:
            raise ValueError(f"{name}: run config word_mode must be one of {WORD_MODES}, got '{config.word_mode}'")
        source, tokens = model_tokens(warehouse, model_id, corpus)
        words = None
        if spec.relation_hits:
            with warehouse.get_connection() as conn:
                words = partition_rows(conn, "words", model_id, corpus, ("example_id", "word_index", "piece_start", "piece_end"))
        report = progress_logger(context, corpus, _PROGRESS_EVERY_SECONDS)
        encoder = load_encoder(source)
        facts = extract_attention_facts(
            encoder, tokens, config.batch_tokens, report, spec.histograms, words, config.word_mode, spec.head_distances
        )
        summaries = facts.head_summaries
        outcomes = [
            rows_sum_to_one(summaries),
            finite(summaries, ["to_cls", "to_sep", "to_self", "entropy", "row_sum_error"]),
            rows_per_example(summaries, tokens["example_id"].n_unique(), encoder.spec.n_layers * encoder.spec.n_heads),
        ]
        if spec.histograms:
            lengths = summaries.select("example_id", "n_tokens").unique()
            outcomes.append(histogram_masses(facts.position_histograms, lengths, "histogram_pairs_and_mass", FACT_CHECKS["histogram_pairs_and_mass"]))
        tables = {"head_summaries": facts.head_summaries}
        if spec.histograms:
            tables["position_histograms"] = facts.position_histograms
        if spec.relation_hits:
            outcomes.append(relation_hit_targets(facts.relation_hits, words, encoder.spec.n_layers * encoder.spec.n_heads))
            tables["relation_hits"] = facts.relation_hits
        if spec.head_distances:
            outcomes.append(finite(facts.head_distances, ["js_sum"], "finite_head_distances"))
            tables["head_distances"] = facts.head_distances
        with warehouse.get_connection() as conn:
            written = replace_partition(conn, tables, model_id, corpus)
        return MaterializeResult(
            metadata={
                **{f"{table}_rows": rows for table, rows in written.items()},
                "examples": facts.n_examples,
                **({"word_mode": config.word_mode} if spec.relation_hits else {}),
                "seconds": round(facts.seconds, 2),
                "examples_per_second": round(facts.n_examples / facts.seconds, 1),
                "max_row_sum_error": MetadataValue.float(float(facts.head_summaries["row_sum_error"].max())),
                "preview": table_preview(facts.head_summaries),
            },
            check_results=[check_result(outcome) for outcome in outcomes],
        )

    return fact_asset


fact_assets_by_corpus = {
    name: build_fact_asset(CORPORA[name], asset) for name, asset in corpus_assets_by_name.items() if CORPORA[name].attention
}
fact_assets = list(fact_assets_by_corpus.values())
