"""Fine-tuning and head-ablation assets (Kovaleva §4.3 Table 1, §4.6 Fig. 8-9).

`finetuned_<task>` (partitioned by the base model) scores the Table 1 settings on the task's
whole validation split (pairs over 128 pieces truncated, as GLUE evaluation does), saves the
pre-trained + fine-tuned checkpoint under models_cache/finetuned/<base model>--<task>/ with its
recipe.json, and registers that checkpoint as a model partition. The recipe names the
checkpoint's registry entry: the attention analysis on its own task's corpus, glue_<task>, so
the Kovaleva views show the pre-trained and the fine-tuned model on the same task.
`<task>_ablation` disables each head and each layer of that checkpoint in turn.
"""

import polars as pl
from dagster import AssetExecutionContext, AssetsDefinition, Config, MaterializeResult, MetadataValue
from dagster_duckdb import DuckDBResource
from pydantic import Field

from dagster_project.compute.checks import ablation_settings_complete, scores_in_range
from dagster_project.compute.kovaleva.ablation import score_ablations
from dagster_project.compute.kovaleva.finetuning import SETTINGS, Precision, Recipe, chosen_settings, score_settings
from dagster_project.compute.kovaleva.tasks import FINETUNE_TASKS
from dagster_project.defs.assets.corpora import corpus_assets_by_name
from dagster_project.defs.assets.writing import model_partition_asset, progress_logger, table_preview, write_partition
from dagster_project.defs.registration import register_model
from dagster_project.defs.resources import ComputeResource, DataDirectory
from dagster_project.defs.tags import analysis_tag
from dagster_project.storage.batches import partition_rows
from dagster_project.storage.model_rows import model_source

SCORES_CHECK = {
    "scores_in_range": "Scores are finite and in [-1, 1]; undefined only for correlations of a constant prediction."
}
ABLATION_CHECKS = {
    **SCORES_CHECK,
    "ablation_settings_complete": "One ablation row per metric for the baseline, every head and every layer.",
}


class TaskSplitConfig(Config):
    # GLUE evaluation truncates a pair to the model's max length (the paper's 128) and scores
    # every validation example; `drop` leaves overlong pairs out, as the attention analyses do.
    max_len: int = 128
    overlong: str = "truncate"


class FineTuningConfig(TaskSplitConfig):
    """The paper's recipe by default (batch 32, 3 epochs); max_steps / train_subset fit a CPU."""

    settings: list[str] = Field(default_factory=lambda: list(SETTINGS))
    learning_rate: float = 2e-5
    batch_size: int = 32
    epochs: int = 3
    max_steps: int | None = None
    train_subset: int | None = None
    seed: int = 0
    precision: Precision = Field(
        default="auto",
        description="The forward and loss's precision in training (weights and AdamW stay float32; scoring runs "
        "in float32): bfloat16 under autocast, float32, or auto: bfloat16 where the device has bfloat16 units "
        "(a CUDA GPU from Ampere on; a CPU with AVX512_BF16, AMX or Arm BF16), else float32.",
    )
    eval_batch_size: int = 64
    # The paper-scale SST-2 fine-tune is 6,315 steps, about 5 hours on 2 CPU cores: saving every 500
    # steps (~25 min there) loses at most that much to a kill, for ~1.3 GB written per save (bert-base).
    checkpoint_every: int = Field(
        default=500,
        ge=0,
        description="Optimizer steps between saves of the training state (model, optimizer, schedule, "
        "generators) under models_cache/training_state/, resumed from after a kill and removed at the end; "
        "0: never saved.",
    )


class AblationConfig(TaskSplitConfig):
    # Padded positions per forward pass, over all the settings stacked in it; None: the device's
    # default. On 2 CPU cores stacking settings saved nothing (MiniLM, RTE: 2.8 s per setting one
    # at a time, 3.4 s sixteen at a time), so the CPU default (4096) stacks ~1 for a batch of 32.
    batch_tokens: int | None = None
    eval_batch_size: int = 32  # examples per batch (each repeated once per setting in a pass)
    max_examples: int | None = None  # score only the first N validation examples (by example_id)


def _recipe(config: FineTuningConfig) -> Recipe:
    """The fine-tuning recipe a run's config asks for."""
    return Recipe(
        learning_rate=config.learning_rate,
        batch_size=config.batch_size,
        epochs=config.epochs,
        max_steps=config.max_steps,
        train_subset=config.train_subset,
        seed=config.seed,
        precision=config.precision,
    )


def _with_other_settings(
    warehouse: DuckDBResource, model_id: str, corpus: str, scores: pl.DataFrame, settings: list[str]
) -> pl.DataFrame:
    """A partition's `task_scores` after a run of some settings: their new rows and the stored rows
    of the others."""
    with warehouse.get_connection() as conn:
        kept = partition_rows(conn, "task_scores", model_id, corpus).filter(~pl.col("setting").is_in(settings))
    return pl.concat([kept.select(scores.columns), scores], how="vertical_relaxed")


def _finetuned_checkpoint(warehouse: DuckDBResource, model_id: str, task: str) -> tuple[str, str]:
    """The partition key and source of the pre-trained + fine-tuned checkpoint that finetuned_<task>
    recorded in `task_scores` for a base model; raises when there is none."""
    with warehouse.get_connection() as conn:
        tuned = partition_rows(conn, "task_scores", model_id, f"glue_{task}", ("setting", "tuned_model_id")).filter(
            pl.col("setting") == "pretrained_finetuned"
        )
        if tuned.is_empty():
            raise ValueError(
                f"No fine-tuned {task} checkpoint for '{model_id}': "
                f"materialize finetuned_{task} with setting pretrained_finetuned first."
            )
        tuned_model_id = tuned["tuned_model_id"][0]
        return tuned_model_id, model_source(conn, tuned_model_id)


def build_finetuned_asset(task: str) -> AssetsDefinition:
    corpus, train_corpus = f"glue_{task}", f"glue_{task}_train"

    @model_partition_asset(
        f"finetuned_{task}",
        description=(
            f"Kovaleva Table 1 on {task.upper()}: scores on the whole validation split (pairs over max_len "
            "truncated, as GLUE evaluation does) of the pre-trained model (untrained head), "
            "a random-init encoder fine-tuned and the pre-trained encoder fine-tuned; writes `task_scores`, "
            "saves and registers the fine-tuned checkpoint."
        ),
        # The corpus assets check the task's files; the scores read the files, since the corpora drop overlong pairs.
        deps=[corpus_assets_by_name[train_corpus], corpus_assets_by_name[corpus]],
        group_name="kovaleva",
        tags=analysis_tag("finetuning"),
        checks=SCORES_CHECK,
    )
    def finetuned_asset(
        context: AssetExecutionContext,
        config: FineTuningConfig,
        warehouse: DuckDBResource,
        data_dir: DataDirectory,
        compute: ComputeResource,
    ) -> MaterializeResult:
        settings = chosen_settings(config.settings)
        model_id = context.partition_key
        with warehouse.get_connection() as conn:
            source = model_source(conn, model_id)
        placement = compute.resolve()
        scored = score_settings(
            source,
            model_id,
            task,
            settings,
            _recipe(config),
            max_len=config.max_len,
            overlong=config.overlong,
            eval_batch_size=config.eval_batch_size,
            checkpoint_every=config.checkpoint_every,
            data_root=data_dir.root,
            compute=placement,
            register=lambda folder: register_model(str(folder), context.instance, warehouse).model_id,
            log=context.log,
        )
        task_scores = _with_other_settings(warehouse, model_id, corpus, scored.rows, config.settings)
        return write_partition(
            context,
            warehouse,
            {"task_scores": task_scores},
            corpus,
            [scores_in_range(task_scores)],
            {
                "train_examples": scored.train_examples,
                "device": str(placement.float32()),
                "training_precision": scored.training_precision or "none (no setting trained)",
                "validation_examples": scored.validation_examples,
                f"validation_over_{config.max_len}_pieces_{config.overlong}": scored.validation_overlong,
                "scores": table_preview(scored.rows.select("setting", "metric", "score", "steps", "seconds"), rows=12),
            },
        )

    return finetuned_asset


def build_ablation_asset(task: str, finetuned: AssetsDefinition) -> AssetsDefinition:
    corpus = f"glue_{task}"

    @model_partition_asset(
        f"{task}_ablation",
        description=(
            f"Kovaleva Fig. 8-9 on {task.upper()}: the fine-tuned checkpoint's validation score with each head, "
            "and each layer, attending uniformly (1/n over real tokens); writes `ablation_scores`."
        ),
        deps=[finetuned, corpus_assets_by_name[corpus]],
        group_name="kovaleva",
        tags=analysis_tag("finetuning"),
        checks=ABLATION_CHECKS,
    )
    def ablation_asset(
        context: AssetExecutionContext,
        config: AblationConfig,
        warehouse: DuckDBResource,
        data_dir: DataDirectory,
        compute: ComputeResource,
    ) -> MaterializeResult:
        tuned_model_id, tuned_source = _finetuned_checkpoint(warehouse, context.partition_key, task)
        placement = compute.resolve()
        ablation = score_ablations(
            tuned_source,
            tuned_model_id,
            task,
            max_len=config.max_len,
            overlong=config.overlong,
            max_examples=config.max_examples,
            eval_batch_size=config.eval_batch_size,
            batch_tokens=config.batch_tokens,
            data_root=data_dir.root,
            compute=placement,
            progress=progress_logger(context, f"{task} ablation"),
        )
        rows, seconds = ablation.rows, ablation.seconds
        context.log.info(
            f"{task} ablation: {ablation.n_settings} settings x {ablation.n_examples} examples in {seconds:.0f} s"
        )
        return write_partition(
            context,
            warehouse,
            {"ablation_scores": rows},
            corpus,
            [scores_in_range(rows), ablation_settings_complete(rows, ablation.n_layers, ablation.n_heads)],
            {
                "settings": ablation.n_settings,
                "examples": ablation.n_examples,
                "seconds": round(seconds, 1),
                "seconds_per_setting": MetadataValue.float(seconds / ablation.n_settings),
                "device": str(placement),
                "baseline": MetadataValue.json(ablation.baseline),
                "largest_gains": table_preview(ablation.gains),
            },
        )

    return ablation_asset


finetuned_assets_by_task = {task: build_finetuned_asset(task) for task in FINETUNE_TASKS}
ablation_assets_by_task = {task: build_ablation_asset(task, finetuned_assets_by_task[task]) for task in FINETUNE_TASKS}
finetuning_assets = [*finetuned_assets_by_task.values(), *ablation_assets_by_task.values()]
