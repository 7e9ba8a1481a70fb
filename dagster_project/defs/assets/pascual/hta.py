"""HTA assets (Pascual et al.): per corpus analysed for HTA, partitioned by model, the
correlations of attention with both contributions, the input-contribution histograms and the
agreement of the weightings of the maps with the input contribution (GlobEnc's comparison);
a blocking check measures the estimator against exact HTA, per estimated layer, before every run,
and the run falls back to exact HTA where the estimator misses."""

from collections.abc import Callable
from typing import Any

import polars as pl
from dagster import AssetExecutionContext, AssetsDefinition, Config, Failure, MaterializeResult
from dagster_duckdb import DuckDBResource

from dagster_project.compute.checks import CHECK_MIN_EXAMPLES, CheckOutcome
from dagster_project.compute.models import LoadedEncoder, load_encoder
from dagster_project.compute.pascual.hta import HtaMethod
from dagster_project.compute.pascual.hta_facts import (
    CONTRIBUTION_CHECK,
    DEFAULT_HTA_METHOD,
    HtaFacts,
    checked_hta_facts,
)
from dagster_project.compute.pascual.saved_contributions import SavedContributions, hta_state_dir
from dagster_project.compute.weightings import WEIGHTINGS
from dagster_project.corpora import CORPORA
from dagster_project.defs.assets.corpora import corpus_assets_by_name, examples_read, model_tokens
from dagster_project.defs.assets.writing import (
    model_partition_asset,
    progress_logger,
    table_preview,
    write_partition,
)
from dagster_project.defs.resources import ComputeResource
from dagster_project.defs.tags import corpus_tags

CHECK_MIN_PEARSON = 0.99
CHECK_EXAMPLES = CHECK_MIN_EXAMPLES  # examples the estimator check runs exact HTA on (all, where the run writes fewer)
ESTIMATE_CHECK = (
    "Before any fact is computed: the run's estimator against exact HTA on a seeded sample of the examples it "
    "writes, spread over their length range (run config check_examples); the worst estimated layer's Pearson "
    "must reach check_min_pearson and, on every estimated layer, each published quantity (row correlations, "
    "contribution center of mass, histogram mass) must lie within its tolerance of exact HTA's (on fewer than 16 "
    "check examples of more written, the gap's one-sided 95% upper bound). Where it misses, "
    "the facts are computed by exact HTA, the check's examples not again (hta_method_used); with "
    "fallback_to_exact false the run fails and writes nothing."
)


class HtaConfig(Config):
    hta_method: str = DEFAULT_HTA_METHOD  # exact | estimate(k)[,bf16][,ends=e] | hutchpp(r,k)[,bf16][,ends=e]
    max_examples: int | None = None  # the first N examples by id; None: all
    seed: int = 0  # probes of example i are seeded with seed + i; the check's sample with seed
    check_examples: int = CHECK_EXAMPLES  # drawn across the length range; fewer: gaps judged by a 95% upper bound
    check_min_pearson: float = CHECK_MIN_PEARSON  # worst estimated layer's Pearson with exact HTA
    # where the estimator misses its check: compute the facts by exact HTA (false: fail the run)
    fallback_to_exact: bool = True
    # the weightings whose maps (per layer and rolled out) are compared with the input contribution (hta_agreement)
    weightings: list[str] = list(WEIGHTINGS)


def _on_estimate_check(
    context: AssetExecutionContext, name: str, method: HtaMethod, min_pearson: float, fallback_to_exact: bool
) -> Callable[[CheckOutcome], None]:
    """Logs the estimator check's figures; when it missed, warns that the run falls back to exact
    HTA, or fails the run before any fact is computed (fallback_to_exact false)."""

    def on_check(check: CheckOutcome) -> None:
        context.log.info(f"{name}: estimator check {check.metadata}")
        if check.passed:
            return
        figures = check.metadata
        misses = (
            f"hta_method {method} misses exact HTA on {figures['examples']} examples: layer "
            f"{figures['worst_layer']} has Pearson {figures['worst_layer_pearson']:.4f} (check_min_pearson "
            f"{min_pearson}); published quantities "
            f"out of tolerance: {figures['published_misses']}."
        )
        if fallback_to_exact:
            context.log.warning(f"{name}: {misses} Computing the facts by exact HTA instead (slower).")
            return
        raise Failure(
            description=f"{name}: {misses} Nothing was written. Use more probes (estimate(k) with a larger k) or "
            "hta_method: exact, lower check_min_pearson, or set fallback_to_exact in the run config.",
            metadata=figures,
        )

    return on_check


def _hta_metadata(
    requested: HtaMethod, used: HtaMethod, estimate: CheckOutcome, encoder: LoadedEncoder, facts: HtaFacts
) -> dict[str, Any]:
    return {
        # the run config's method, and the one the facts were computed by (exact where it missed its check)
        "hta_method": str(requested),
        "hta_method_used": str(used),
        # the estimator check's verdict and sample, which a later plan reads (reproduction.expected_fallback)
        "estimator_within_tolerance": bool(estimate.metadata["estimator_within_tolerance"]),
        "check_examples": int(estimate.metadata["examples"]),
        "device": str(encoder.compute),
        "examples": facts.n_examples,
        "seconds": round(facts.seconds, 1),
        "seconds_per_example": round(facts.seconds / facts.n_examples, 2),
        # Closed form (0 jvps) where the family's scores allow it, else the exact per-layer fallback.
        "previous_layer_method": facts.previous_layer_cost.method,
        "previous_layer_jvps": facts.previous_layer_cost.jvps,
        "previous_layer_seconds": round(facts.previous_layer_cost.seconds, 2),
        "agreement_per_weighting": table_preview(
            facts.agreement.group_by("weighting").agg(pl.col("spearman").mean()).sort("spearman")
        ),
        "example_per_pattern": table_preview(
            facts.example_maps.group_by("pattern").agg(example_id=pl.col("example_id").first()).sort("pattern")
        ),
    }


def build_hta_asset(corpus: str) -> AssetsDefinition:
    name = f"{corpus}_hta_facts"

    @model_partition_asset(
        name,
        description=f"Pascual et al. HTA on '{corpus}': attention vs previous-layer and input contribution per head, "
        "input-contribution position histograms, and per layer each weighting's input attribution vs the input "
        "contribution (run config `weightings`). Each example's input contribution is saved under "
        "models_cache/hta_state/ as it is computed, resumed from after a kill and removed once the facts are written.",
        deps=[corpus_assets_by_name[corpus]],
        group_name="pascual",
        tags=corpus_tags(corpus, "hta"),
        checks={"contributions_sum_to_one": CONTRIBUTION_CHECK, "estimate_matches_exact": ESTIMATE_CHECK},
    )
    def hta_asset(
        context: AssetExecutionContext, config: HtaConfig, warehouse: DuckDBResource, compute: ComputeResource
    ) -> MaterializeResult:
        method = HtaMethod.parse(config.hta_method)
        if config.check_examples < CHECK_EXAMPLES:
            context.log.warning(
                f"{name}: check_examples {config.check_examples} < {CHECK_EXAMPLES}: the estimator check sees fewer "
                "examples than its documented minimum: each published gap is judged by its one-sided 95% upper bound "
                "(gap + 1.645 x its jackknife standard error), and on one example an estimator cannot pass"
            )
        read = examples_read(context, warehouse, [corpus])
        source, tokens = model_tokens(warehouse, context.partition_key, corpus)
        placement = compute.resolve()
        if note := placement.float32_note("HTA"):
            context.log.warning(note)
        encoder = load_encoder(source, placement.float32())
        saved = SavedContributions.of(hta_state_dir() / f"{context.partition_key}--{corpus}", encoder.model)
        if resumed := saved.count():
            context.log.info(f"{name}: resuming, {resumed} input contributions saved by a killed run in {saved.folder}")
        checked = checked_hta_facts(
            encoder,
            tokens,
            method,
            max_examples=config.max_examples,
            seed=config.seed,
            check_examples=config.check_examples,
            check_min_pearson=config.check_min_pearson,
            fallback_to_exact=config.fallback_to_exact,
            # no method in the label: the check decides it (and logs it) after the logger is made
            progress=progress_logger(context, f"{corpus} HTA"),
            checked=_on_estimate_check(context, name, method, config.check_min_pearson, config.fallback_to_exact),
            weightings=config.weightings,
            saved=saved,
        )
        facts = checked.facts
        result = write_partition(
            context,
            warehouse,
            facts.tables,
            corpus,
            checked.outcomes,
            _hta_metadata(method, checked.method, checked.outcomes[-1], encoder, facts),
            facts.correlations,
            examples=read,
        )
        saved.remove()
        return result

    return hta_asset


hta_assets_by_corpus = {name: build_hta_asset(name) for name, spec in CORPORA.items() if spec.hta}
hta_assets = list(hta_assets_by_corpus.values())
