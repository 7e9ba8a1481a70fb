"""Gradient-importance asset (Clark et al. §3.2, Fig. 3), partitioned by model: the
gradient of the model's own loss w.r.t. each attention weight, by key type, into
`grad_importance`. A model without a loss head gets no rows, and the metadata says why."""

from functools import partial

import polars as pl
from dagster import AssetExecutionContext, Config, MaterializeResult, MetadataValue
from dagster_duckdb import DuckDBResource

from dagster_project.compute.batching import first_examples
from dagster_project.compute.checks import grad_sums_valid
from dagster_project.compute.clark.gradients import (
    MASK_PROBABILITY,
    MASKED_LM,
    GradImportanceTable,
    LossModel,
    NoLossHead,
    grad_importance_table,
    load_loss_model,
    needs_labels,
)
from dagster_project.defs.assets.corpora import corpus_assets_by_name, examples_read, model_tokens
from dagster_project.defs.assets.writing import model_partition_asset, progress_logger, table_preview, write_partition
from dagster_project.defs.resources import ComputeResource
from dagster_project.defs.tags import analysis_tag
from dagster_project.storage.batches import partition_rows


class GradImportanceConfig(Config):
    corpus: str = "wiki_segments"  # a labelled corpus (glue_*) for fine-tuned classifiers
    max_examples: int | None = None  # the first N examples by id; None: all
    seed: int = 0  # masked-LM masking
    batch_tokens: int | None = None  # padded positions per batch; None: the device's backward default


def _example_labels(
    warehouse: DuckDBResource, model_id: str, corpus: str, loss_model: LossModel | NoLossHead
) -> pl.DataFrame | None:
    """The corpus's example labels where the model's loss takes them, else None."""
    if not needs_labels(loss_model):
        return None
    with warehouse.get_connection() as conn:
        return partition_rows(conn, "examples", model_id, corpus, ("example_id", "label"))


def _pass_metadata(table: GradImportanceTable) -> dict:
    """The pass's examples, time and mean gradient per target type; or why it has no rows."""
    if isinstance(table.outcome, NoLossHead):
        return {"reason": table.outcome.reason}
    return {
        "examples": table.outcome.n_examples,
        "seconds": round(table.outcome.seconds, 1),
        "preview": table_preview(
            table.outcome.rows.group_by("target_type")
            .agg(pl.col("grad_sum").sum() / pl.col("weight_count").sum())
            .sort("target_type")
        ),
    }


@model_partition_asset(
    "grad_importance",
    description="Clark et al. Fig. 3: |d loss / d attention| per layer and head for attention to [SEP], '.'/',' "
    "and other tokens, with the model's masked-LM or sequence-classification loss. Writes `grad_importance`; "
    "a model without a loss head (e.g. a bare sentence-transformers encoder) gets no rows and a `reason`.",
    deps=[corpus_assets_by_name["wiki_segments"]],
    group_name="clark",
    tags=analysis_tag("clark"),
    checks={
        "grad_sums_valid": (
            "Gradient sums are finite and non-negative, each over a positive weight count (no rows: no loss head)."
        )
    },
)
def grad_importance(
    context: AssetExecutionContext, config: GradImportanceConfig, warehouse: DuckDBResource, compute: ComputeResource
) -> MaterializeResult:
    model_id, corpus = context.partition_key, config.corpus
    read = examples_read(context, warehouse, [corpus])
    source, tokens = model_tokens(warehouse, model_id, corpus)
    tokens = first_examples(tokens, config.max_examples)
    placement = compute.resolve()
    if note := placement.float32_note("Gradient importance"):
        context.log.warning(note)
    loss_model = load_loss_model(source, placement.device)
    examples = _example_labels(warehouse, model_id, corpus, loss_model)
    progress = partial(progress_logger, context)
    table = grad_importance_table(
        source, loss_model, tokens, examples, corpus, config.seed, config.batch_tokens, progress
    )
    if isinstance(table.outcome, NoLossHead):
        context.log.warning(f"grad_importance: no rows for {model_id} on {corpus}. {table.outcome.reason}")
    return write_partition(
        context,
        warehouse,
        {"grad_importance": table.rows},
        corpus,
        [grad_sums_valid(table.rows)],
        {
            "corpus": corpus,
            "loss_name": table.loss_name,
            "masking": MetadataValue.text(
                f"{MASK_PROBABILITY:.0%} of content tokens, 80% mask / 10% random / 10% kept"
                if table.loss_name == MASKED_LM
                else "none"
            ),
            "seed": config.seed,
            "device": str(placement.float32()),
            **_pass_metadata(table),
        },
        examples=read,
    )
