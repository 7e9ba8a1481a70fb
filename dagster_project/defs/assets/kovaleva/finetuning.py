"""Fine-tuning and head-ablation assets (Kovaleva §4.3 Table 1, §4.6 Fig. 8-9).

`finetuned_<task>` (partitioned by the base model) scores the Table 1 settings on the task's
whole validation split (pairs over 128 pieces truncated, as GLUE evaluation does), saves the
pre-trained + fine-tuned checkpoint under models_cache/finetuned/<base model>--<task>/ with its
recipe.json, and registers that checkpoint as a model partition. The recipe names the
checkpoint's registry entry: the attention analysis on its own task's corpus, glue_<task>, so
the Kovaleva views show the pre-trained and the fine-tuned model on the same task.
`<task>_ablation` disables each head and each layer of that checkpoint in turn.
"""

import json
import time

import polars as pl
import torch
from dagster import AssetExecutionContext, AssetsDefinition, Config, MaterializeResult, MetadataValue, asset
from dagster_duckdb import DuckDBResource
from pydantic import Field
from transformers import AutoTokenizer, PreTrainedTokenizerBase

from dagster_project.compute.checks import ablation_settings_complete, scores_in_range
from dagster_project.compute.kovaleva.ablation import ablation_settings, settings_logits, use_ablation_attention
from dagster_project.compute.kovaleva.finetuning import (
    FINETUNE_TASKS,
    SETTINGS,
    EncodedTask,
    Recipe,
    TaskData,
    build_classifier,
    encode_task,
    fine_tune,
    glue_metrics,
    length_sorted_batches,
    load_classifier,
    pad_inputs,
    predict_logits,
    recipe_record,
    save_checkpoint,
)
from dagster_project.compute.models import inspect_model
from dagster_project.corpora import CORPORA
from dagster_project.defs.assets.corpora import corpus_assets_by_name
from dagster_project.defs.assets.writing import (
    check_result,
    check_specs,
    progress_logger,
    table_preview,
    write_partition,
)
from dagster_project.defs.partitions import model_partitions
from dagster_project.defs.pools import GPU_PASS_OP_TAGS, GPU_PASS_POOL
from dagster_project.defs.registration import register_model
from dagster_project.defs.resources import ComputeResource, DataDirectory
from dagster_project.defs.tags import analysis_tag
from dagster_project.settings import models_cache_dir
from dagster_project.storage.warehouse import model_source, partition_rows, replace_partition

FINETUNED_ANALYSES = ("attention",)  # what a fine-tuned checkpoint is registered for (on its task's corpus)
SCORES_CHECK = {
    "scores_in_range": "Scores are finite and in [-1, 1]; undefined only for correlations of a constant prediction."
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
    eval_batch_size: int = 64


class AblationConfig(TaskSplitConfig):
    # Padded positions per forward pass, over all the settings stacked in it; None: the device's
    # default. On 2 CPU cores stacking settings saved nothing (MiniLM, RTE: 2.8 s per setting one
    # at a time, 3.4 s sixteen at a time), so the CPU default (4096) stacks ~1 for a batch of 32.
    batch_tokens: int | None = None
    eval_batch_size: int = 32  # examples per batch (each repeated once per setting in a pass)
    max_examples: int | None = None  # score only the first N validation examples (by example_id)


def _task_split(
    data_dir: DataDirectory, corpus: str, tokenizer: PreTrainedTokenizerBase, config: TaskSplitConfig
) -> EncodedTask:
    """The whole labelled split of a GLUE corpus, read from its files (the `<corpus>_examples`
    rows keep only the pairs that fit, up to the corpus's size) and encoded for scoring."""
    texts = CORPORA[corpus].read(data_dir.root).texts
    return encode_task(texts, tokenizer, config.max_len, config.overlong, corpus)


def build_finetuned_asset(task: str) -> AssetsDefinition:
    corpus, train_corpus = f"glue_{task}", f"glue_{task}_train"

    @asset(
        name=f"finetuned_{task}",
        description=(
            f"Kovaleva Table 1 on {task.upper()}: scores on the whole validation split (pairs over max_len "
            "truncated, as GLUE evaluation does) of the pre-trained model (untrained head), "
            "a random-init encoder fine-tuned and the pre-trained encoder fine-tuned; writes `task_scores`, "
            "saves and registers the fine-tuned checkpoint."
        ),
        partitions_def=model_partitions,
        # The corpus assets check the task's files are there (and select them for the run); the
        # scores read the whole split from the files, since the corpora drop overlong pairs.
        deps=[corpus_assets_by_name[train_corpus], corpus_assets_by_name[corpus]],
        group_name="kovaleva",
        tags=analysis_tag("finetuning"),
        pool=GPU_PASS_POOL,
        op_tags=GPU_PASS_OP_TAGS,
        check_specs=check_specs(f"finetuned_{task}", SCORES_CHECK),
    )
    def finetuned_asset(
        context: AssetExecutionContext,
        config: FineTuningConfig,
        warehouse: DuckDBResource,
        data_dir: DataDirectory,
        compute: ComputeResource,
    ) -> MaterializeResult:
        unknown = set(config.settings) - set(SETTINGS)
        if unknown or not config.settings:
            raise ValueError(f"settings must be a non-empty subset of {list(SETTINGS)}, got {config.settings}")
        model_id = context.partition_key
        with warehouse.get_connection() as conn:
            source = model_source(conn, model_id)
        spec = inspect_model(source)
        tokenizer = AutoTokenizer.from_pretrained(spec.resolved_path)
        train_split = _task_split(data_dir, train_corpus, tokenizer, config)
        validation_split = _task_split(data_dir, corpus, tokenizer, config)
        train, validation = train_split.data, validation_split.data
        context.log.info(
            f"{task}: {len(train)} train and {len(validation)} validation examples; over {config.max_len} pieces "
            f"({config.overlong}): {train_split.n_overlong} train, {validation_split.n_overlong} validation"
        )
        pad_id, token_types = tokenizer.pad_token_id, spec.takes_token_types
        recipe = Recipe(
            learning_rate=config.learning_rate,
            batch_size=config.batch_size,
            epochs=config.epochs,
            max_steps=config.max_steps,
            train_subset=config.train_subset,
            seed=config.seed,
        )
        placement = compute.resolve()
        if note := placement.float32_note("Fine-tuning"):
            context.log.warning(note)
        rows = []
        for setting in [name for name in SETTINGS if name in config.settings]:
            start = time.perf_counter()
            model = build_classifier(
                spec.resolved_path,
                task,
                "random" if setting == "random_init_finetuned" else "pretrained",
                recipe.seed,
                placement.device,
            )
            log = None
            if setting != "pretrained":

                def report(step: int, steps: int, loss: float, seconds: float, setting: str = setting) -> None:
                    context.log.info(f"{task} {setting}: step {step}/{steps}, loss {loss:.4f}, {seconds:.0f} s")

                log = fine_tune(model, train, recipe, pad_id, token_types, report)
            scores = glue_metrics(
                task, predict_logits(model, validation, pad_id, token_types, config.eval_batch_size), validation.labels
            )
            record = recipe_record(recipe, source, task, log) | {
                "setting": setting,
                "validation": scores,
                "max_len": config.max_len,
                "overlong": config.overlong,
                "validation_overlong": validation_split.n_overlong,
            }
            tuned_model_id = None
            if setting == "pretrained_finetuned":
                # recipe.json is also the checkpoint's registry entry (model_registry.checkpoint_entry)
                entry = {"corpora": [corpus], "analyses": list(FINETUNED_ANALYSES)}
                folder = save_checkpoint(
                    model, tokenizer, models_cache_dir() / "finetuned" / f"{model_id}--{task}", record | entry
                )
                tuned_model_id = register_model(str(folder), context.instance, warehouse).model_id
                context.log.info(f"Saved {folder} and registered it as model partition '{tuned_model_id}'")
            seconds = time.perf_counter() - start
            context.log.info(f"{task} {setting}: {scores} ({seconds:.0f} s)")
            rows += [
                {
                    "task": task,
                    "setting": setting,
                    "metric": metric,
                    "score": score,
                    "n_examples": len(validation),
                    "tuned_model_id": tuned_model_id,
                    "steps": log and log.steps,
                    "train_examples": log and log.train_examples,
                    "final_loss": log and log.losses[-1],
                    "recipe": json.dumps(record, sort_keys=True),
                    "seconds": seconds,
                }
                for metric, score in scores.items()
            ]
        scores_frame = pl.DataFrame(
            rows,
            schema_overrides={
                "tuned_model_id": pl.String,
                "steps": pl.Int32,
                "train_examples": pl.Int32,
                "final_loss": pl.Float64,
            },
        )
        with warehouse.get_connection() as conn:
            # a run of some settings keeps the rows of the others
            kept = partition_rows(conn, "task_scores", model_id, corpus).filter(
                ~pl.col("setting").is_in(config.settings)
            )
            task_scores = pl.concat([kept.select(scores_frame.columns), scores_frame], how="vertical_relaxed")
            written = replace_partition(conn, {"task_scores": task_scores}, model_id, corpus)
        return MaterializeResult(
            metadata={
                "task_scores_rows": written["task_scores"],
                "train_examples": len(train),
                "device": str(placement.float32()),
                "validation_examples": len(validation),
                f"validation_over_{config.max_len}_pieces_{config.overlong}": validation_split.n_overlong,
                "scores": table_preview(scores_frame.select("setting", "metric", "score", "steps", "seconds"), rows=12),
            },
            check_results=[check_result(scores_in_range(task_scores))],
        )

    return finetuned_asset


def build_ablation_asset(task: str, finetuned: AssetsDefinition) -> AssetsDefinition:
    corpus = f"glue_{task}"

    @asset(
        name=f"{task}_ablation",
        description=(
            f"Kovaleva Fig. 8-9 on {task.upper()}: the fine-tuned checkpoint's validation score with each head, "
            "and each layer, attending uniformly (1/n over real tokens); writes `ablation_scores`."
        ),
        partitions_def=model_partitions,
        deps=[finetuned, corpus_assets_by_name[corpus]],
        group_name="kovaleva",
        tags=analysis_tag("finetuning"),
        pool=GPU_PASS_POOL,
        op_tags=GPU_PASS_OP_TAGS,
        check_specs=check_specs(
            f"{task}_ablation",
            {
                **SCORES_CHECK,
                "ablation_settings_complete": (
                    "One ablation row per metric for the baseline, every head and every layer."
                ),
            },
        ),
    )
    def ablation_asset(
        context: AssetExecutionContext,
        config: AblationConfig,
        warehouse: DuckDBResource,
        data_dir: DataDirectory,
        compute: ComputeResource,
    ) -> MaterializeResult:
        model_id = context.partition_key
        with warehouse.get_connection() as conn:
            tuned = partition_rows(conn, "task_scores", model_id, corpus, ("setting", "tuned_model_id")).filter(
                pl.col("setting") == "pretrained_finetuned"
            )
            if tuned.is_empty():
                raise ValueError(
                    f"No fine-tuned {task} checkpoint for '{model_id}': "
                    f"materialize finetuned_{task} with setting pretrained_finetuned first."
                )
            tuned_model_id = tuned["tuned_model_id"][0]
            tuned_source = model_source(conn, tuned_model_id)
        spec = inspect_model(tuned_source)
        tokenizer = AutoTokenizer.from_pretrained(spec.resolved_path)
        validation = _task_split(data_dir, corpus, tokenizer, config).data
        if config.max_examples:
            validation = TaskData(
                *(
                    field[: config.max_examples]
                    for field in (validation.example_ids, validation.token_ids, validation.segments, validation.labels)
                )
            )
        pad_id = tokenizer.pad_token_id
        placement = compute.resolve()
        model = use_ablation_attention(load_classifier(spec.resolved_path, placement))
        settings = ablation_settings(spec.n_layers, spec.n_heads)
        batches = length_sorted_batches(validation, config.eval_batch_size)
        inputs = (pad_inputs(validation, batch, pad_id, spec.takes_token_types) for batch in batches)
        report = progress_logger(context, f"{task} ablation")
        start = time.perf_counter()
        logits = settings_logits(
            model,
            inputs,
            settings.disabled,
            config.batch_tokens or placement.batch_tokens(),
            lambda done, seconds: report(sum(map(len, batches[:done])), len(validation), seconds),
        )
        seconds = time.perf_counter() - start
        order = torch.tensor([index for batch in batches for index in batch])
        labels = validation.labels[order]
        scores = [glue_metrics(task, setting_logits, labels) for setting_logits in logits]
        kinds = ["baseline"] + ["head" if head else "layer" for head in settings.head[1:]]
        frame = pl.DataFrame(
            [
                {
                    "kind": kind,
                    "layer": layer,
                    "head": head,
                    "metric": metric,
                    "score": score,
                    "baseline_score": scores[0][metric],
                }
                for kind, layer, head, setting_scores in zip(kinds, settings.layer, settings.head, scores)
                for metric, score in setting_scores.items()
            ],
            schema_overrides={"layer": pl.Int16, "head": pl.Int16},
        ).with_columns(task=pl.lit(task), tuned_model_id=pl.lit(tuned_model_id), n_examples=pl.lit(len(validation)))
        context.log.info(f"{task} ablation: {len(kinds)} settings x {len(validation)} examples in {seconds:.0f} s")
        best = (
            frame.filter(pl.col("kind") != "baseline")
            .with_columns(delta=pl.col("score") - pl.col("baseline_score"))
            .sort("delta", descending=True)
        )
        return write_partition(
            context,
            warehouse,
            {"ablation_scores": frame},
            corpus,
            [scores_in_range(frame), ablation_settings_complete(frame, spec.n_layers, spec.n_heads)],
            {
                "settings": len(kinds),
                "examples": len(validation),
                "seconds": round(seconds, 1),
                "seconds_per_setting": MetadataValue.float(seconds / len(kinds)),
                "device": str(placement),
                "baseline": MetadataValue.json(scores[0]),
                "largest_gains": table_preview(best.select("kind", "layer", "head", "metric", "score", "delta")),
            },
        )

    return ablation_asset


finetuned_assets_by_task = {task: build_finetuned_asset(task) for task in FINETUNE_TASKS}
ablation_assets_by_task = {task: build_ablation_asset(task, finetuned_assets_by_task[task]) for task in FINETUNE_TASKS}
finetuning_assets = [*finetuned_assets_by_task.values(), *ablation_assets_by_task.values()]
