"""HTA assets (Pascual et al.): per corpus analysed for HTA, partitioned by model, the
correlations of attention with both contributions and the input-contribution histograms;
an asset check measures the estimator against exact HTA on every run."""

import polars as pl
import torch
from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetExecutionContext,
    AssetsDefinition,
    Config,
    MaterializeResult,
    asset,
)
from dagster_duckdb import DuckDBResource

from dagster_project.compute.batching import length_batches
from dagster_project.compute.checks import histogram_masses
from dagster_project.compute.hta import HtaMethod, estimate_error
from dagster_project.compute.hta_facts import extract_hta_facts
from dagster_project.compute.models import LoadedEncoder, load_encoder
from dagster_project.corpora import CORPORA
from dagster_project.defs.assets.corpora import corpus_assets_by_name, model_tokens
from dagster_project.defs.assets.writing import (
    check_specs,
    progress_logger,
    table_preview,
    write_partition,
)
from dagster_project.defs.partitions import model_partitions
from dagster_project.defs.pools import GPU_PASS_OP_TAGS, GPU_PASS_POOL
from dagster_project.defs.resources import ComputeResource
from dagster_project.defs.tags import corpus_tags

DEFAULT_HTA_METHOD = "estimate(8,bf16)"  # fastest setting with Pearson >= 0.99 vs exact (bench/bench_hta.py)
CHECK_MIN_PEARSON = 0.99
CONTRIBUTION_CHECK = "Input contributions of every query row sum to 1; histogram pairs sum to n^2."


class HtaConfig(Config):
    hta_method: str = DEFAULT_HTA_METHOD  # exact | estimate(k) | estimate(k,bf16)
    max_examples: int | None = None  # the first N examples by id; None: all
    seed: int = 0
    check_examples: int = 2  # the corpus's shortest examples, where exact HTA is cheap


def build_hta_asset(corpus: str) -> AssetsDefinition:
    name = f"{corpus}_hta_facts"

    @asset(
        name=name,
        description=f"Pascual et al. HTA on '{corpus}': attention vs previous-layer and input contribution per head, "
        "and input-contribution position histograms.",
        partitions_def=model_partitions,
        deps=[corpus_assets_by_name[corpus]],
        group_name="pascual",
        tags=corpus_tags(corpus, "hta"),
        pool=GPU_PASS_POOL,
        op_tags=GPU_PASS_OP_TAGS,
        check_specs=[
            *check_specs(name, {"contributions_sum_to_one": CONTRIBUTION_CHECK}),
            AssetCheckSpec(
                "estimate_matches_exact",
                asset=name,
                description="Estimated input contributions against exact HTA on the corpus's shortest examples "
                f"(run config check_examples): Pearson >= {CHECK_MIN_PEARSON}; records the mean absolute error.",
            ),
        ],
    )
    def hta_asset(
        context: AssetExecutionContext, config: HtaConfig, warehouse: DuckDBResource, compute: ComputeResource
    ) -> MaterializeResult:
        method = HtaMethod.parse(config.hta_method)
        source, corpus_tokens = model_tokens(warehouse, context.partition_key, corpus)
        tokens = corpus_tokens
        if config.max_examples:
            keep = tokens["example_id"].unique().sort()[: config.max_examples]
            tokens = tokens.filter(tokens["example_id"].is_in(keep.implode()))
        report = progress_logger(context, f"{corpus} HTA ({method})")
        placement = compute.resolve()
        if note := placement.float32_note("HTA"):
            context.log.warning(note)
        encoder = load_encoder(source, placement.float32())
        facts = extract_hta_facts(encoder, tokens, method, config.seed, report)
        check = _estimate_check(encoder, corpus_tokens, method, config.check_examples)
        lengths = tokens.group_by("example_id").agg(n_tokens=pl.len())
        sums = histogram_masses(facts.histograms, lengths, "contributions_sum_to_one", CONTRIBUTION_CHECK)
        return write_partition(
            context,
            warehouse,
            {
                "hta_correlations": facts.correlations,
                "contribution_histograms": facts.histograms,
                "hta_example_maps": facts.example_maps,
            },
            corpus,
            [sums, check],
            {
                "hta_method": str(method),
                "device": str(encoder.compute),
                "examples": facts.n_examples,
                "seconds": round(facts.seconds, 1),
                "seconds_per_example": round(facts.seconds / facts.n_examples, 2),
                "example_per_pattern": table_preview(
                    facts.example_maps.group_by("pattern").agg(example_id=pl.col("example_id").first()).sort("pattern")
                ),
            },
            facts.correlations,
        )

    return hta_asset


def _estimate_check(
    encoder: LoadedEncoder, tokens: pl.DataFrame, method: HtaMethod, n_examples: int
) -> AssetCheckResult:
    """Exact against the run's method on the shortest examples (passes trivially for exact)."""
    batches = list(length_batches(tokens, encoder.tokenizer.pad_token_id or 0, 1, encoder.spec.takes_token_types))
    with torch.no_grad():
        embeddings = [
            encoder.model.embeddings(
                input_ids=batch.inputs["input_ids"], token_type_ids=batch.inputs.get("token_type_ids")
            )[0]
            for batch in (batch.to(encoder.compute.device) for batch in batches[:n_examples])
        ]
    pearson, mae = (1.0, 0.0) if method.probes is None else estimate_error(encoder.model, embeddings, method)
    return AssetCheckResult(
        check_name="estimate_matches_exact",
        passed=pearson >= CHECK_MIN_PEARSON,
        severity=AssetCheckSeverity.WARN,
        metadata={
            "pearson_with_exact": pearson,
            "mean_abs_error": mae,
            "hta_method": str(method),
            "examples": len(embeddings),
        },
    )


hta_assets_by_corpus = {name: build_hta_asset(name) for name, spec in CORPORA.items() if spec.hta}
hta_assets = list(hta_assets_by_corpus.values())
