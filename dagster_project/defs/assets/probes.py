"""Probing-classifier asset (Clark et al. §5, Table 3): probes trained on UD EWT dev,
scored by UAS on UD EWT test, written to `probe_scores`."""

import time

import polars as pl
import torch
from dagster import AssetExecutionContext, Config, MaterializeResult, MetadataValue, asset
from dagster_duckdb import DuckDBResource

from dagster_project.compute.checks import probe_scores_complete
from dagster_project.compute.metrics import WORD_MODES
from dagster_project.compute.models import load_encoder
from dagster_project.compute.probes import (
    ProbeBatch,
    attachment_counts,
    keep_first_examples,
    predict_heads,
    probe_batches,
    probe_for,
    random_init_encoder,
    right_branching,
    train_probe,
    with_offset_features,
)
from dagster_project.corpora.annotation import SPACY_PIPELINE, load_spacy
from dagster_project.defs.assets.corpora import corpus_assets_by_name, model_tokens
from dagster_project.defs.assets.writing import (
    check_specs,
    progress_logger,
    table_preview,
    write_partition,
)
from dagster_project.defs.partitions import model_partitions
from dagster_project.defs.pools import GPU_PASS_OP_TAGS, GPU_PASS_POOL
from dagster_project.defs.tags import analysis_tag
from dagster_project.storage.warehouse import partition_rows

TRAIN_CORPUS, TEST_CORPUS = "ud_ewt_dev", "ud_ewt_test"
WORD_VECTOR_SOURCES = ("model", "spacy")


class ProbeConfig(Config):
    word_mode: str = "mean"  # how a split word's attention row is formed (mean | first | max)
    epochs: int = 10
    learning_rate: float = 0.05
    seed: int = 0  # batch order of training and the random-init encoder's weights
    max_sentences: int | None = None  # first N sentences of each corpus, for quick runs
    word_vectors: list[str] = list(WORD_VECTOR_SOURCES)  # model: its input embeddings; spacy: the pipeline's vectors
    batch_tokens: int = 1024  # padded word pieces per forward batch, which is also a training batch


def _corpus_frames(
    warehouse: DuckDBResource, model_id: str, corpus: str, max_sentences: int | None
) -> tuple[str, dict[str, pl.DataFrame]]:
    source, tokens = model_tokens(warehouse, model_id, corpus)
    with warehouse.get_connection() as conn:
        words = partition_rows(
            conn, "words", model_id, corpus, ("example_id", "word_index", "piece_start", "piece_end")
        )
        dependencies = partition_rows(
            conn, "dependencies", model_id, corpus, ("example_id", "ud_id", "word_index", "head_word_index", "upos")
        )
    if dependencies.is_empty():
        raise ValueError(
            f"No gold dependencies for model '{model_id}' and corpus '{corpus}': materialize {corpus}_examples first."
        )
    return source, keep_first_examples({"tokens": tokens, "words": words, "dependencies": dependencies}, max_sentences)


@asset(
    description=(
        "Clark §5 probing classifiers: attention-only and attention-and-word-vector probes, "
        "right-branching, distance + word vectors, and the random-init encoder, trained on "
        f"{TRAIN_CORPUS} and scored by UAS (punctuation excluded) on {TEST_CORPUS}. Runs its own forward "
        "passes over both corpora (the probe needs full word-level maps, which the fact tables do not keep)."
    ),
    partitions_def=model_partitions,
    deps=[corpus_assets_by_name[TRAIN_CORPUS], corpus_assets_by_name[TEST_CORPUS]],
    group_name="clark",
    tags=analysis_tag("clark"),
    pool=GPU_PASS_POOL,
    op_tags=GPU_PASS_OP_TAGS,
    check_specs=check_specs(
        "dependency_probes",
        {
            "probe_scores_complete": (
                "One score per probe the run config asks for (skipped ones excepted), with UAS in [0, 1]."
            )
        },
    ),
)
def dependency_probes(
    context: AssetExecutionContext, config: ProbeConfig, warehouse: DuckDBResource
) -> MaterializeResult:
    if config.word_mode not in WORD_MODES:
        raise ValueError(f"word_mode must be one of {WORD_MODES}, got '{config.word_mode}'")
    unknown = set(config.word_vectors) - set(WORD_VECTOR_SOURCES)
    if unknown:
        raise ValueError(f"word_vectors must be among {WORD_VECTOR_SOURCES}, got {sorted(unknown)}")
    model_id = context.partition_key
    source, train_frames = _corpus_frames(warehouse, model_id, TRAIN_CORPUS, config.max_sentences)
    _, test_frames = _corpus_frames(warehouse, model_id, TEST_CORPUS, config.max_sentences)
    encoder = load_encoder(source)
    started = time.perf_counter()

    def extract(model: torch.nn.Module, label: str) -> tuple[list[ProbeBatch], list[ProbeBatch]]:
        return tuple(
            probe_batches(
                model,
                frames["tokens"],
                frames["words"],
                frames["dependencies"],
                encoder.tokenizer.pad_token_id or 0,
                encoder.spec.takes_token_types,
                config.word_mode,
                config.batch_tokens,
                progress_logger(context, f"{label} forward {corpus}"),
            )
            for corpus, frames in ((TRAIN_CORPUS, train_frames), (TEST_CORPUS, test_frames))
        )

    rows: list[dict] = []

    def score(
        probe: str,
        word_vectors: str,
        test: list[ProbeBatch],
        predictions: list[torch.Tensor],
        since: float,
        loss: float | None = None,
    ) -> None:
        correct, total = attachment_counts(predictions, test)
        rows.append(
            {
                "probe": probe,
                "word_vectors": word_vectors,
                "uas": correct / total,
                "n_words": total,
                "n_correct": correct,
                "train_loss": loss,
                "seconds": time.perf_counter() - since,
            }
        )
        context.log.info(f"{probe}: UAS {100 * correct / total:.1f} on {total} words ({rows[-1]['seconds']:.0f} s)")

    def fit(
        probe: str,
        word_vectors: str,
        train: list[ProbeBatch],
        test: list[ProbeBatch],
        use_words: bool,
        both_directions: bool,
        since: float,
    ) -> None:
        model = probe_for(train[0], use_words, both_directions)

        def report(done, total, seconds):
            return context.log.info(f"{probe}: epoch {done}/{total} in {seconds:.0f} s")

        loss = train_probe(model, train, config.epochs, config.learning_rate, config.seed, report)
        score(probe, word_vectors, test, [predict_heads(model, batch) for batch in test], since, loss)

    since = time.perf_counter()
    train, test = extract(encoder.model, "pre-trained")
    forward_seconds = time.perf_counter() - since
    score("right_branching", "none", test, [right_branching(batch) for batch in test], time.perf_counter())
    fit("attn", "none", train, test, use_words=False, both_directions=True, since=time.perf_counter())
    skipped = {}
    if "model" in config.word_vectors:
        fit("attn_words", "model", train, test, use_words=True, both_directions=True, since=time.perf_counter())

        def offsets(batches):
            return [with_offset_features(batch) for batch in batches]

        fit(
            "distance_words",
            "model",
            offsets(train),
            offsets(test),
            use_words=True,
            both_directions=False,
            since=time.perf_counter(),
        )
    if "spacy" in config.word_vectors and load_spacy().vocab.vectors.shape[0] == 0:
        # A pipeline without static vectors would only give zeros (or context tensors): report, never fake.
        skipped["attn_spacy_words"] = f"skipped, no vectors ({SPACY_PIPELINE} has none)"
        context.log.warning(f"attn_spacy_words: {skipped['attn_spacy_words']}")
    elif "spacy" in config.word_vectors:
        raise NotImplementedError(f"{SPACY_PIPELINE} has vectors: the spaCy-vector probe is not wired yet.")
    del train, test
    if "model" in config.word_vectors:
        since = time.perf_counter()
        train, test = extract(random_init_encoder(encoder.model, config.seed), "random-init")
        fit("random_init_attn_words", "model", train, test, use_words=True, both_directions=True, since=since)
        del train, test

    scores = pl.DataFrame(rows).with_columns(
        train_corpus=pl.lit(TRAIN_CORPUS),
        n_train_sentences=pl.lit(train_frames["tokens"]["example_id"].n_unique()),
        n_test_sentences=pl.lit(test_frames["tokens"]["example_id"].n_unique()),
        word_mode=pl.lit(config.word_mode),
        epochs=pl.lit(config.epochs),
        learning_rate=pl.lit(config.learning_rate),
        seed=pl.lit(config.seed),
        torch_threads=pl.lit(torch.get_num_threads()),
    )
    model_probes = ["attn_words", "distance_words", "random_init_attn_words"] if "model" in config.word_vectors else []
    complete = probe_scores_complete(scores, ["right_branching", "attn", *model_probes])
    return write_partition(
        context,
        warehouse,
        {"probe_scores": scores},
        TEST_CORPUS,
        [complete],
        {
            **{f"uas_{row['probe']}": MetadataValue.float(round(100 * row["uas"], 2)) for row in rows},
            **skipped,
            "forward_seconds_pretrained": round(forward_seconds, 1),
            "seconds": round(time.perf_counter() - started, 1),
            "torch_threads": torch.get_num_threads(),
            "train_sentences": scores["n_train_sentences"][0],
            "test_words": rows[0]["n_words"],
            "preview": table_preview(
                scores.select("probe", "word_vectors", "uas", "n_words", "train_loss", "seconds"), rows=len(rows)
            ),
        },
    )
