"""Gradient-importance asset (Clark et al. §3.2, Fig. 3), partitioned by model: the
gradient of the model's own loss w.r.t. each attention weight, by key type, into
`grad_importance`. A model without a loss head gets no rows, and the metadata says why."""

import polars as pl
from dagster import AssetExecutionContext, Config, MaterializeResult, MetadataValue, asset
from dagster_duckdb import DuckDBResource

from dagster_project.compute.checks import grad_sums_valid
from dagster_project.compute.clark.gradients import (
    MASK_PROBABILITY,
    MASKED_LM,
    LossModel,
    NoLossHead,
    check_labels,
    empty_rows,
    extract_grad_importance,
    load_loss_model,
)
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
from dagster_project.defs.tags import analysis_tag
from dagster_project.storage.warehouse import partition_rows


class GradImportanceConfig(Config):
    corpus: str = "wiki_segments"  # a labelled corpus (glue_*) for fine-tuned classifiers
    max_examples: int | None = None  # the first N examples by id; None: all
    seed: int = 0  # masked-LM masking
    batch_tokens: int | None = None  # padded positions per batch; None: the device's backward default


@asset(
    description="Clark et al. Fig. 3: |d loss / d attention| per layer and head for attention to [SEP], '.'/',' "
    "and other tokens, with the model's masked-LM or sequence-classification loss. Writes `grad_importance`; "
    "a model without a loss head (e.g. a bare sentence-transformers encoder) gets no rows and a `reason`.",
    partitions_def=model_partitions,
    deps=[corpus_assets_by_name["wiki_segments"]],
    group_name="clark",
    tags=analysis_tag("clark"),
    pool=GPU_PASS_POOL,
    op_tags=GPU_PASS_OP_TAGS,
    check_specs=check_specs(
        "grad_importance",
        {
            "grad_sums_valid": (
                "Gradient sums are finite and non-negative, each over a positive weight count (no rows: no loss head)."
            )
        },
    ),
)
def grad_importance(
    context: AssetExecutionContext, config: GradImportanceConfig, warehouse: DuckDBResource, compute: ComputeResource
) -> MaterializeResult:
    model_id, corpus = context.partition_key, config.corpus
    source, tokens = model_tokens(warehouse, model_id, corpus)
    if config.max_examples:
        keep = tokens["example_id"].unique().sort()[: config.max_examples]
        tokens = tokens.filter(pl.col("example_id").is_in(keep.implode()))
    placement = compute.resolve()
    if note := placement.float32_note("Gradient importance"):
        context.log.warning(note)
    loss_model = load_loss_model(source, placement.device)
    reason = loss_model.reason if isinstance(loss_model, NoLossHead) else None
    labels = None
    if isinstance(loss_model, LossModel) and loss_model.loss_name != MASKED_LM:
        with warehouse.get_connection() as conn:
            examples = partition_rows(conn, "examples", model_id, corpus, ("example_id", "label"))
        examples = examples.filter(pl.col("example_id").is_in(tokens["example_id"].unique().implode()))
        labels = check_labels(examples, loss_model.loss_name, loss_model.model.config.num_labels, corpus)
        if labels.is_empty():
            reason = (
                f"Model '{source}' has a {loss_model.loss_name} head, but corpus '{corpus}' has no labels: "
                "set the run config's corpus to the labelled corpus of its task (e.g. glue_sst2)."
            )
    if reason:
        context.log.warning(f"grad_importance: no rows for {model_id} on {corpus}. {reason}")
        rows, loss_name, metadata = empty_rows(), "none", {"reason": reason}
    else:
        report = progress_logger(context, f"{corpus} gradient importance ({loss_model.loss_name})")
        facts = extract_grad_importance(loss_model, tokens, config.seed, labels, config.batch_tokens, report)
        rows, loss_name = facts.rows, loss_model.loss_name
        metadata = {
            "examples": facts.n_examples,
            "seconds": round(facts.seconds, 1),
            "preview": table_preview(
                rows.group_by("target_type")
                .agg(pl.col("grad_sum").sum() / pl.col("weight_count").sum())
                .sort("target_type")
            ),
        }
    is_mlm = loss_name == MASKED_LM
    rows = rows.with_columns(
        loss_name=pl.lit(loss_name),
        mask_probability=pl.lit(MASK_PROBABILITY if is_mlm else None, dtype=pl.Float32),
        seed=pl.lit(config.seed, dtype=pl.Int32),
    )
    return write_partition(
        context,
        warehouse,
        {"grad_importance": rows},
        corpus,
        [grad_sums_valid(rows)],
        {
            "corpus": corpus,
            "loss_name": loss_name,
            "masking": MetadataValue.text(
                f"{MASK_PROBABILITY:.0%} of content tokens, 80% mask / 10% random / 10% kept" if is_mlm else "none"
            ),
            "seed": config.seed,
            "device": str(placement.float32()),
            **metadata,
        },
    )
