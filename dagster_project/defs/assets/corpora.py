"""Corpus assets: one per corpus, partitioned by model, writing `examples` and `tokens`."""

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl
from dagster import AssetExecutionContext, AssetKey, AssetsDefinition, Config, MaterializeResult, MetadataValue
from dagster_duckdb import DuckDBResource
from transformers import PretrainedConfig

from dagster_project.compute.checks import tokens_match_examples, word_pieces_inside_example
from dagster_project.compute.models import load_encoder
from dagster_project.corpora import CORPORA, DOCUMENT_OVERLONG, OVERLONG, CorpusError, CorpusSpec
from dagster_project.corpora.manifest import how_to_get
from dagster_project.corpora.tables import CorpusTables, corpus_tables
from dagster_project.defs.assets.models import encoder_model
from dagster_project.defs.assets.writing import model_partition_asset, table_preview, write_partition
from dagster_project.defs.provenance import batch_written_in_run
from dagster_project.defs.resources import DataDirectory
from dagster_project.defs.tags import corpus_tags
from dagster_project.defs.versioning import corpus_files_key
from dagster_project.storage.batches import EXAMPLES_TABLE, current_batch, partition_rows, require_current_examples
from dagster_project.storage.model_rows import model_source

CORPUS_CHECKS = {
    "tokens_match_examples": "Each example's tokens are positions 0..n-1 with n = examples.n_tokens <= max_len.",
    "word_pieces_inside_example": "Every word's [piece_start, piece_end) lies inside its example's tokens.",
}


class CorpusConfig(Config):
    """Sampling parameters; left unset, the corpus's defaults apply (docs/methods.md §2)."""

    # Longest example in pieces; xnli_*: the model's d_head by default, 64 is the paper's fixed cap.
    max_len: int | None = None
    overlong: str | None = None  # drop | truncate examples over max_len (wiki_segments, documents: truncate) | windows
    size: int | None = None  # at most this many examples (the corpus's default: all or its size in docs/methods.md §2)
    seed: int | None = None


def head_dimension(config: PretrainedConfig) -> int:
    """d_head of an encoder's attention heads (config.head_dim where a model sets it)."""
    return getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads


# examples.max_len and n_tokens are SMALLINT (sql/schema/examples.sql).
SMALLINT_MAX = 32767
# Model types whose position ids start after the padding id (RoBERTa's embeddings): the first
# pad_token_id + 1 of their max_position_embeddings never hold a token.
_POSITIONS_AFTER_PADDING = frozenset(
    {"roberta", "xlm-roberta", "xlm-roberta-xl", "camembert", "mpnet", "longformer", "data2vec-text"}
)


def model_positions(config: PretrainedConfig) -> int | None:
    """The most pieces an input of the model can have, as its absolute position embeddings say;
    None where it has none (DeBERTa-v3: relative positions only)."""
    positions = getattr(config, "max_position_embeddings", None)
    if not positions or getattr(config, "position_biased_input", True) is False:
        return None
    if config.model_type in _POSITIONS_AFTER_PADDING:
        positions -= (getattr(config, "pad_token_id", None) or 0) + 1
    return positions


def run_max_len(name: str, spec: CorpusSpec, config: CorpusConfig, model_config: PretrainedConfig) -> int:
    """max_len of a run: the run config's, else the corpus's default, at most the model's positions.
    A run config max_len over the model's positions (its forward pass would fail after the examples
    were written) or over what the examples' SMALLINT columns hold is an error, naming the bound."""
    positions = model_positions(model_config)
    if config.max_len is None:
        default = spec.default_max_len(head_dimension(model_config))
        return min(default, positions) if positions else default
    if positions is not None and config.max_len > positions:
        raise ValueError(
            f"{name}: run config max_len {config.max_len} is more than the {positions} positions of the model "
            f"({model_config.model_type}), which takes no longer input: set max_len to at most {positions} "
            "(or leave it out for the corpus's default)"
        )
    if config.max_len > SMALLINT_MAX:
        raise ValueError(
            f"{name}: run config max_len {config.max_len} is more than {SMALLINT_MAX}, the most the examples' "
            f"max_len and n_tokens columns (SMALLINT) hold: set max_len to at most {SMALLINT_MAX}"
        )
    return config.max_len


def _run_sampling(name: str, spec: CorpusSpec, config: CorpusConfig) -> tuple[int | None, int, str]:
    """size, seed and overlong of a run: the run config's where it sets them, else the corpus's.
    A size or max_len under 1 is an error, not "unset" (a negative size would slice off examples)."""
    for setting in ("size", "max_len"):
        value = getattr(config, setting)
        if value is not None and value < 1:
            raise ValueError(
                f"{name}: run config {setting} must be at least 1, got {value} (leave it out for the corpus's default)"
            )
    size = spec.size if config.size is None else config.size
    seed = spec.seed if config.seed is None else config.seed
    overlong = config.overlong or spec.overlong
    allowed = DOCUMENT_OVERLONG if spec.prepare else OVERLONG
    if overlong not in allowed:
        raise ValueError(f"{name}: run config overlong must be one of {allowed}, got {overlong!r}")
    return size, seed, overlong


def _require_files(spec: CorpusSpec, data_dir: Path) -> None:
    """Fails naming every file of the corpus missing from the data directory, before any model is loaded."""
    missing = spec.missing_files(data_dir)
    if missing:
        raise CorpusError(
            f"Corpus '{spec.name}' needs {', '.join(map(str, missing))}: {how_to_get([spec.name])}, or set "
            "ATTN_DATA_DIR or the `data_dir` resource's path to a folder laid out like ../shared/data."
        )


def _corpus_metadata(corpus: CorpusTables, max_len: int, size: int | None, seed: int, overlong: str) -> dict[str, Any]:
    """What was sampled, dropped and kept, and how spaCy's tokens met the corpus's words."""
    encoded, tables = corpus.encoded, corpus.tables
    alignment = (
        tables["word_features"]["spacy_alignment"].value_counts().sort("spacy_alignment")
        if "word_features" in tables
        else None
    )
    return {
        "candidates": encoded.n_candidates,
        "dropped_too_long": encoded.n_too_long if corpus.encoding_overlong == "drop" else 0,
        "truncated": encoded.n_truncated,
        "words_without_pieces": encoded.words["piece_start"].null_count(),
        "skipped_malformed": corpus.n_malformed,
        **({"spacy_alignment": table_preview(alignment, rows=4)} if alignment is not None else {}),
        "max_len": max_len,
        "overlong": overlong,
        "seed": seed,
        "size": MetadataValue.int(size) if size else "all",
        "mean_tokens": MetadataValue.float(float(tables["examples"]["n_tokens"].mean())),
    }


def build_corpus_asset(spec: CorpusSpec) -> AssetsDefinition:
    name = f"{spec.name}_examples"

    @model_partition_asset(
        name,
        description=(
            f"{spec.description} Writes `examples`, `tokens`, `words` (and annotation) rows for the model's tokenizer."
        ),
        deps=[encoder_model, *([corpus_files_key(spec.name)] if spec.files else [])],
        group_name="corpora",
        tags=corpus_tags(spec.name),
        checks=CORPUS_CHECKS,
        model_pass=False,
    )
    def corpus_asset(
        context: AssetExecutionContext, config: CorpusConfig, warehouse: DuckDBResource, data_dir: DataDirectory
    ) -> MaterializeResult:
        size, seed, overlong = _run_sampling(name, spec, config)
        _require_files(spec, data_dir.root)
        with warehouse.get_connection() as conn:
            source = model_source(conn, context.partition_key)
        encoder = load_encoder(source)
        max_len = run_max_len(name, spec, config, encoder.model.config)
        corpus = corpus_tables(spec, data_dir.root, encoder.tokenizer, max_len, size, seed, overlong, context.log)
        examples = corpus.tables["examples"]
        return write_partition(
            context,
            warehouse,
            corpus.tables,
            spec.name,
            [
                tokens_match_examples(examples, corpus.encoded.tokens),
                word_pieces_inside_example(corpus.encoded.words, examples),
            ],
            _corpus_metadata(corpus, max_len, size, seed, overlong),
            examples.select("example_id", "source_ref", "n_tokens", "text_a", "text_b"),
        )

    return corpus_asset


corpus_assets_by_name = {name: build_corpus_asset(spec) for name, spec in CORPORA.items()}
corpus_assets = list(corpus_assets_by_name.values())
corpus_specs_by_key = {asset.key: CORPORA[name] for name, asset in corpus_assets_by_name.items()}


def check_corpus_config(key: AssetKey, config: CorpusConfig, model_config: PretrainedConfig) -> None:
    """Raise the ValueError that corpus asset `key` (of corpus_specs_by_key) would raise for its
    settings `config` on the model of `model_config`, without running it: what the run checks
    before it writes anything."""
    _run_sampling(key.to_user_string(), corpus_specs_by_key[key], config)
    run_max_len(key.to_user_string(), corpus_specs_by_key[key], config, model_config)


def examples_read(context: AssetExecutionContext, warehouse: DuckDBResource, corpora: Sequence[str]) -> dict[str, str]:
    """Per corpus, the batch of the partition's examples that the step of `context` computes from:
    the one its own run's corpus step wrote, else (a run that did not sample them) the current one.
    Raises ExamplesReplacedError, before any work, when another run has replaced this run's own;
    write_partition(examples=...) checks them again in its transaction. A corpus without examples
    (or no corpus at all) is left out: its reader says what is missing."""
    assets = {corpus: corpus_assets_by_name[corpus] for corpus in corpora if corpus in corpus_assets_by_name}
    written = {corpus: batch_written_in_run(context, asset.key) for corpus, asset in assets.items()}
    own = {corpus: batch for corpus, batch in written.items() if batch}
    with warehouse.get_connection() as conn:
        require_current_examples(conn, context.partition_key, own)
        current = {corpus: current_batch(conn, EXAMPLES_TABLE, context.partition_key, corpus) for corpus in corpora}
    return {corpus: batch for corpus, batch in current.items() if batch}


def model_tokens(warehouse: DuckDBResource, model_id: str, corpus: str) -> tuple[str, pl.DataFrame]:
    """A model's source and the word pieces of one of its corpora, as the forward passes need them."""
    with warehouse.get_connection() as conn:
        source = model_source(conn, model_id)
        tokens = partition_rows(
            conn, "tokens", model_id, corpus, ("example_id", "position", "token_id", "token_class", "segment")
        )
    if tokens.is_empty():
        raise ValueError(
            f"No tokens for model '{model_id}' and corpus '{corpus}': materialize {corpus}_examples first."
        )
    return source, tokens
