"""Faithfulness of the weightings of the maps (Modarressi et al. 2022, GlobEnc §5), partitioned by model:
for a fine-tuned classifier on its task's corpus, per (example, weighting, aggregation) the Spearman
correlation between the weighting's last-layer [CLS] attribution (the layer's own map, and the maps rolled
out through every layer) and the gradient x input saliency of the predicted class, into
`saliency_correlations` (compute/compare/faithfulness.py). It belongs to the attention analysis on SST-2, so
the run of a checkpoint fine-tuned on SST-2 (its registry entry: attention on glue_sst2) computes it; a model
without a classification head gets no rows, and the metadata says why (run planning leaves it out for one)."""

import polars as pl
from dagster import AssetExecutionContext, Config, MaterializeResult, MetadataValue
from dagster_duckdb import DuckDBResource

from dagster_project.compute.batching import first_examples
from dagster_project.compute.checks import correlations_in_range
from dagster_project.compute.clark.gradients import CLASSIFICATION, NoLossHead, load_loss_model
from dagster_project.compute.compare.faithfulness import ROW_SCHEMA, weighting_faithfulness
from dagster_project.compute.weightings import WEIGHTINGS, check_weightings
from dagster_project.defs.assets.corpora import corpus_assets_by_name, examples_read, model_tokens
from dagster_project.defs.assets.writing import model_partition_asset, progress_logger, table_preview, write_partition
from dagster_project.defs.resources import ComputeResource
from dagster_project.defs.tags import corpus_tags

# the corpus whose run computes the asset (and its default run config): GlobEnc's faithfulness task
FAITHFULNESS_CORPUS = "glue_sst2"


class FaithfulnessConfig(Config):
    corpus: str = FAITHFULNESS_CORPUS  # the corpus of the task the classifier was fine-tuned on
    weightings: list[str] = list(WEIGHTINGS)
    max_examples: int | None = None  # the first N examples by id; None: all
    batch_tokens: int | None = None  # padded positions per batch; None: the device's backward default


@model_partition_asset(
    "weighting_faithfulness",
    description="GlobEnc §5 (Modarressi et al. 2022): per (example, weighting of the maps, aggregation) the Spearman "
    "correlation of the last layer's [CLS] attribution (the layer's own map, and the maps rolled out through the "
    "layers) with the gradient x input saliency of a fine-tuned classifier's prediction, on its task's corpus (run "
    "config `corpus`, default glue_sst2). Writes `saliency_correlations`; a model without a single-label "
    "classification head gets no rows and a `reason`.",
    deps=[corpus_assets_by_name[FAITHFULNESS_CORPUS]],
    group_name="compare",
    tags=corpus_tags(FAITHFULNESS_CORPUS, "attention"),
    checks={
        "correlations_in_range": "One Spearman correlation per (example, weighting, aggregation), null or within "
        "[-1, 1]."
    },
)
def weighting_faithfulness_asset(
    context: AssetExecutionContext, config: FaithfulnessConfig, warehouse: DuckDBResource, compute: ComputeResource
) -> MaterializeResult:
    model_id, corpus = context.partition_key, config.corpus
    weightings = check_weightings(config.weightings)
    read = examples_read(context, warehouse, [corpus])
    source, tokens = model_tokens(warehouse, model_id, corpus)
    tokens = first_examples(tokens, config.max_examples)
    placement = compute.resolve()
    if note := placement.float32_note("Weighting faithfulness"):
        context.log.warning(note)
    classifier = load_loss_model(source, placement.device)
    if isinstance(classifier, NoLossHead):
        reason = classifier.reason
    elif classifier.loss_name != CLASSIFICATION:
        reason = f"Model '{source}' has a {classifier.loss_name} head; the saliency explains a classifier's prediction."
    else:
        reason = None
    if reason:
        context.log.warning(f"weighting_faithfulness: no rows for {model_id} on {corpus}. {reason}")
        rows, n_examples, metadata = pl.DataFrame(schema=ROW_SCHEMA), 0, {"reason": reason}
    else:
        found = weighting_faithfulness(
            classifier, tokens, weightings, config.batch_tokens, progress_logger(context, "weighting_faithfulness")
        )
        rows, n_examples = found.rows, found.n_examples
        means = rows.group_by("aggregation", "weighting").agg(pl.col("spearman").mean()).sort("aggregation", "spearman")
        metadata = {
            "examples": n_examples,
            "seconds": round(found.seconds, 1),
            "preview": table_preview(means, rows=12),
        }
    return write_partition(
        context,
        warehouse,
        {"saliency_correlations": rows},
        corpus,
        [correlations_in_range(rows, weightings, n_examples)],
        {
            "corpus": corpus,
            "weightings": MetadataValue.json(list(weightings)),
            "device": str(placement.float32()),
            **metadata,
        },
        examples=read,
    )
