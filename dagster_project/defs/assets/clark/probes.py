"""Probing-classifier asset (Clark et al. §5, Table 3): probes trained on UD EWT dev (the
paper: PTB WSJ train, which is not free; run config `train_file` trains on any CoNLL-U file),
scored by UAS on UD EWT test, written to `probe_scores`."""

import time
from pathlib import Path

import polars as pl
import torch
from dagster import AssetExecutionContext, Config, MaterializeResult, MetadataValue, asset
from dagster_duckdb import DuckDBResource
from transformers import PreTrainedTokenizerBase

from dagster_project.compute.checks import probe_scores_complete
from dagster_project.compute.clark.probes import (
    DISTANCE_HIDDEN,
    DISTANCE_LEARNING_RATE,
    ProbeBatch,
    attachment_counts,
    distance_probe_for,
    keep_first_examples,
    predict_heads,
    probe_batches,
    probe_for,
    random_init_encoder,
    read_word_vectors,
    right_branching,
    train_probe,
)
from dagster_project.compute.metrics import WORD_MODES
from dagster_project.compute.models import load_encoder
from dagster_project.corpora import CORPORA, encode_corpus, read_ud
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

TRAIN_CORPUS, TEST_CORPUS = "ud_ewt_dev", "ud_ewt_test"
INPUT_EMBEDDINGS = "input_embeddings"  # `word_vectors` of the probes without a vector file: not GloVe


class ProbeConfig(Config):
    word_mode: str = "mean"  # how a split word's attention row is formed (mean | first | max)
    epochs: int = 10
    learning_rate: float = 0.05
    distance_learning_rate: float = DISTANCE_LEARNING_RATE  # the distance baseline's network (Adam)
    distance_hidden: int = DISTANCE_HIDDEN  # its hidden layer's width
    seed: int = 0  # batch order of training, the random-init encoder's and the distance network's weights
    max_sentences: int | None = None  # first N sentences of each corpus, for quick runs
    # The paper's probes use GloVe. Unset, they use the model's own input embeddings (mean over a
    # word's pieces; word_vectors = input_embeddings); a path: a GloVe-style text file's vectors.
    word_vectors_file: str | None = None
    # A CoNLL-U file to train on instead of UD EWT dev (the paper: PTB WSJ train in Stanford
    # Dependencies); its sentences over 128 pieces are dropped, like the corpora's.
    train_file: str | None = None
    # Padded word pieces per forward batch, which is also a training batch: fixed whatever the device,
    # since it changes what the probes learn.
    batch_tokens: int = 1024


def _corpus_frames(
    warehouse: DuckDBResource, model_id: str, corpus: str, max_sentences: int | None
) -> tuple[str, dict[str, pl.DataFrame]]:
    source, tokens = model_tokens(warehouse, model_id, corpus)
    with warehouse.get_connection() as conn:
        words = partition_rows(
            conn, "words", model_id, corpus, ("example_id", "word_index", "word", "piece_start", "piece_end")
        )
        dependencies = partition_rows(
            conn, "dependencies", model_id, corpus, ("example_id", "ud_id", "word_index", "head_word_index", "upos")
        )
    if dependencies.is_empty():
        raise ValueError(
            f"No gold dependencies for model '{model_id}' and corpus '{corpus}': materialize {corpus}_examples first."
        )
    return source, keep_first_examples({"tokens": tokens, "words": words, "dependencies": dependencies}, max_sentences)


def _file_frames(path: Path, tokenizer: PreTrainedTokenizerBase, max_sentences: int | None) -> dict[str, pl.DataFrame]:
    """A user's CoNLL-U file read and tokenized like a UD corpus (sentences over 128 pieces dropped)."""
    if not path.is_file():
        raise FileNotFoundError(f"train_file {path} not found: give the path of a CoNLL-U file with gold heads")
    encoded = encode_corpus(read_ud([path]), tokenizer, CORPORA[TRAIN_CORPUS].max_len, None, 0)
    frames = {"tokens": encoded.tokens, "words": encoded.words, "dependencies": encoded.annotations["dependencies"]}
    return keep_first_examples(frames, max_sentences)


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
    context: AssetExecutionContext, config: ProbeConfig, warehouse: DuckDBResource, compute: ComputeResource
) -> MaterializeResult:
    if config.word_mode not in WORD_MODES:
        raise ValueError(f"word_mode must be one of {WORD_MODES}, got '{config.word_mode}'")
    model_id = context.partition_key
    source, test_frames = _corpus_frames(warehouse, model_id, TEST_CORPUS, config.max_sentences)
    # The forward passes use the forward dtype; the probes train on float32 copies of their features.
    encoder = load_encoder(source, compute.resolve())
    if config.train_file:
        train_path = Path(config.train_file).expanduser().resolve()
        train_corpus, train_frames = (
            f"file:{train_path.name}",
            _file_frames(train_path, encoder.tokenizer, config.max_sentences),
        )
    else:
        train_corpus, (_, train_frames) = (
            TRAIN_CORPUS,
            _corpus_frames(warehouse, model_id, TRAIN_CORPUS, config.max_sentences),
        )
    vector_table, vectors_name, coverage = None, INPUT_EMBEDDINGS, {}
    if config.word_vectors_file:
        corpus_words = set(pl.concat([train_frames["words"]["word"], test_frames["words"]["word"]]))
        vector_table = read_word_vectors(Path(config.word_vectors_file).expanduser(), corpus_words)
        vectors_name = f"file:{vector_table.name}"
        for name, frames in ((train_corpus, train_frames), (TEST_CORPUS, test_frames)):
            found = vector_table.lookup(frames["words"]["word"].to_list())[1]
            coverage[f"word_vector_coverage_{name}"] = MetadataValue.float(round(float(found.float().mean()), 4))
        context.log.info(f"{vector_table.name}: {len(vector_table.index)} corpus words with vectors; {coverage}")
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
                vector_table,
            )
            for corpus, frames in ((train_corpus, train_frames), (TEST_CORPUS, test_frames))
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
        model: torch.nn.Module,
        train: list[ProbeBatch],
        test: list[ProbeBatch],
        since: float,
        learning_rate: float = config.learning_rate,
    ) -> None:
        def report(done, total, seconds):
            return context.log.info(f"{probe}: epoch {done}/{total} in {seconds:.0f} s")

        loss = train_probe(model, train, config.epochs, learning_rate, config.seed, report)
        score(probe, word_vectors, test, [predict_heads(model, batch) for batch in test], since, loss)

    since = time.perf_counter()
    train, test = extract(encoder.model, "pre-trained")
    forward_seconds = time.perf_counter() - since
    score("right_branching", "none", test, [right_branching(batch) for batch in test], time.perf_counter())
    fit("attn", "none", probe_for(train[0], False, True), train, test, time.perf_counter())
    fit("attn_words", vectors_name, probe_for(train[0], True, True), train, test, time.perf_counter())
    distance = distance_probe_for(train[0], config.distance_hidden, config.seed)
    fit("distance_words", vectors_name, distance, train, test, time.perf_counter(), config.distance_learning_rate)
    del train, test
    since = time.perf_counter()
    train, test = extract(random_init_encoder(encoder.model, config.seed), "random-init")
    fit("random_init_attn_words", vectors_name, probe_for(train[0], True, True), train, test, since)
    del train, test

    scores = pl.DataFrame(rows).with_columns(
        train_corpus=pl.lit(train_corpus),
        n_train_sentences=pl.lit(train_frames["tokens"]["example_id"].n_unique()),
        n_test_sentences=pl.lit(test_frames["tokens"]["example_id"].n_unique()),
        word_mode=pl.lit(config.word_mode),
        epochs=pl.lit(config.epochs),
        learning_rate=pl.lit(config.learning_rate),
        seed=pl.lit(config.seed),
        torch_threads=pl.lit(torch.get_num_threads()),
    )
    complete = probe_scores_complete(
        scores, ["right_branching", "attn", "attn_words", "distance_words", "random_init_attn_words"]
    )
    return write_partition(
        context,
        warehouse,
        {"probe_scores": scores},
        TEST_CORPUS,
        [complete],
        {
            **{f"uas_{row['probe']}": MetadataValue.float(round(100 * row["uas"], 2)) for row in rows},
            **coverage,
            "forward_seconds_pretrained": round(forward_seconds, 1),
            "seconds": round(time.perf_counter() - started, 1),
            "torch_threads": torch.get_num_threads(),
            "device": str(encoder.compute),
            "train_sentences": scores["n_train_sentences"][0],
            "test_words": rows[0]["n_words"],
            "preview": table_preview(
                scores.select("probe", "word_vectors", "uas", "n_words", "train_loss", "seconds"), rows=len(rows)
            ),
        },
    )
