"""Kovaleva et al. §4.3 (Fig. 5): per GLUE task, the cosine similarity of a base model's
and its fine-tuned model's attention maps over the task's validation examples.

Partitioned by the base model; the fine-tuned model is another model partition, found in
`task_scores` (written by the fine-tuning assets) or named in the run config."""

import duckdb
import polars as pl
from dagster import AssetExecutionContext, AssetsDefinition, Config, MaterializeResult, MetadataValue
from dagster_duckdb import DuckDBResource

from dagster_project.compute.checks import cosines_in_range, rows_per_example
from dagster_project.compute.kovaleva.finetune_similarity import finetune_similarity
from dagster_project.defs.assets.corpora import corpus_assets_by_name, examples_read, model_tokens
from dagster_project.defs.assets.kovaleva.finetuning import finetuned_assets_by_task
from dagster_project.defs.assets.writing import model_partition_asset, progress_logger, write_partition
from dagster_project.defs.resources import ComputeResource
from dagster_project.defs.tags import analysis_tag
from dagster_project.storage.batches import partition_rows
from dagster_project.storage.model_rows import model_source
from dagster_project.storage.schema import ensure_schema

FINETUNED_SETTING = "pretrained_finetuned"
SIMILARITY_CHECKS = {
    "cosines_in_range": "Every cosine is finite and within [-1, 1] (+/- 1e-5).",
    "rows_per_example": "One cosine per (example, layer, head) for every validation example scored.",
}


class FinetuneSimilarityConfig(Config):
    tuned_model_id: str = ""  # partition key of the fine-tuned model; empty: look it up in task_scores
    max_examples: int = 1000  # the first N validation examples by id
    batch_tokens: int | None = None  # padded positions per forward batch; None: the device's default


def tuned_model_for(conn: duckdb.DuckDBPyConnection, base_model_id: str, task: str) -> str | None:
    """The model partition fine-tuned from pre-trained weights of a base model on a task,
    as recorded in `task_scores`; None when there is none."""
    ensure_schema(conn)
    tuned = partition_rows(conn, "task_scores", base_model_id, f"glue_{task}", ("setting", "tuned_model_id")).filter(
        (pl.col("setting") == FINETUNED_SETTING) & pl.col("tuned_model_id").is_not_null()
    )
    return None if tuned.is_empty() else tuned["tuned_model_id"][0]


def _tuned_model(
    warehouse: DuckDBResource, name: str, base_model_id: str, task: str, configured: str
) -> tuple[str, str]:
    """The partition key and source of the fine-tuned model that asset `name` compares with a base
    model: `configured` (run config), else the one recorded in `task_scores`; raises when there is none."""
    with warehouse.get_connection() as conn:
        tuned_id = configured or tuned_model_for(conn, base_model_id, task)
        if tuned_id is None:
            raise ValueError(
                f"{name}: no model fine-tuned from '{base_model_id}' on {task} is recorded in `task_scores`. "
                f"Materialize finetuned_{task} for partition '{base_model_id}' first "
                "(it saves the checkpoint under models_cache/finetuned/ and registers it as a model partition), "
                "or give a fine-tuned partition key as run config `tuned_model_id`."
            )
        return tuned_id, model_source(conn, tuned_id)


def build_similarity_asset(task: str, finetuned: AssetsDefinition) -> AssetsDefinition:
    corpus = f"glue_{task}"
    name = f"{corpus}_finetune_similarity"

    @model_partition_asset(
        name,
        description=f"Kovaleva Fig. 5 on {corpus}: per (example, layer, head) cosine of the base and fine-tuned "
        "attention maps (cropped n x n), into `finetune_cosines`.",
        # finetuned_<task> records the checkpoint in task_scores (same base-model partition).
        deps=[corpus_assets_by_name[corpus], finetuned],
        group_name="kovaleva",
        tags=analysis_tag("finetuning"),
        checks=SIMILARITY_CHECKS,
    )
    def similarity_asset(
        context: AssetExecutionContext,
        config: FinetuneSimilarityConfig,
        warehouse: DuckDBResource,
        compute: ComputeResource,
    ) -> MaterializeResult:
        model_id = context.partition_key
        tuned_id, tuned_source = _tuned_model(warehouse, name, model_id, task, config.tuned_model_id)
        read = examples_read(context, warehouse, [corpus])
        source, tokens = model_tokens(warehouse, model_id, corpus)
        placement = compute.resolve()
        similarity = finetune_similarity(
            source,
            tuned_source,
            tuned_id,
            tokens,
            max_examples=config.max_examples,
            batch_tokens=config.batch_tokens,
            compute=placement,
            progress=progress_logger(context, name),
        )
        cosines = similarity.cosines
        return write_partition(
            context,
            warehouse,
            {"finetune_cosines": cosines},
            corpus,
            [cosines_in_range(cosines), rows_per_example(cosines, similarity.n_examples, similarity.n_layer_heads)],
            {
                "tuned_model_id": tuned_id,
                "device": str(placement),
                "examples": similarity.n_examples,
                "seconds": round(similarity.seconds, 2),
                "mean_cosine_per_layer": MetadataValue.json(
                    {str(layer): round(value, 4) for layer, value in similarity.per_layer.iter_rows()}
                ),
            },
            cosines,
            examples=read,
        )

    return similarity_asset


similarity_assets_by_task = {
    task: build_similarity_asset(task, finetuned) for task, finetuned in finetuned_assets_by_task.items()
}
similarity_assets = list(similarity_assets_by_task.values())
