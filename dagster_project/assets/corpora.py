"""Corpus assets: one per corpus, partitioned by model, writing `examples` and `tokens`."""

from dagster import AssetExecutionContext, AssetsDefinition, Config, MaterializeResult, MetadataValue, asset
from dagster_duckdb import DuckDBResource

from dagster_project.assets.metadata import table_preview
from dagster_project.assets.models import encoder_model
from dagster_project.corpora import CORPORA, CorpusError, CorpusSpec, encode_corpus
from dagster_project.models import load_encoder
from dagster_project.partitions import model_partitions
from dagster_project.resources import DataDirectory
from dagster_project.warehouse import model_source, replace_partition


class CorpusConfig(Config):
    """Sampling parameters; left unset, the corpus's METHODS defaults apply."""

    max_len: int | None = None
    size: int | None = None
    seed: int | None = None


def build_corpus_asset(spec: CorpusSpec) -> AssetsDefinition:
    @asset(
        name=f"{spec.name}_examples",
        description=f"{spec.description} Writes `examples` and `tokens` rows for the model's tokenizer.",
        partitions_def=model_partitions,
        deps=[encoder_model],
        group_name="corpora",
        pool="warehouse_writer",
    )
    def corpus_asset(
        context: AssetExecutionContext, config: CorpusConfig, warehouse: DuckDBResource, data_dir: DataDirectory
    ) -> MaterializeResult:
        max_len, size, seed = config.max_len or spec.max_len, config.size or spec.size, config.seed or spec.seed
        missing = spec.missing_files(data_dir.root)
        if missing:
            raise CorpusError(
                f"Corpus '{spec.name}' needs {', '.join(map(str, missing))}. Set ATTN_DATA_DIR or the "
                "`data_dir` resource's path to a folder laid out like ../shared/data."
            )
        with warehouse.get_connection() as conn:
            source = model_source(conn, context.partition_key)
        encoded = encode_corpus(spec.read(data_dir.root), load_encoder(source).tokenizer, max_len, size, seed)
        examples = encoded.examples.with_columns(max_len=max_len, seed=seed)
        with warehouse.get_connection() as conn:
            written = replace_partition(
                conn, {"examples": examples, "tokens": encoded.tokens}, context.partition_key, spec.name
            )
        context.log.info(
            f"{spec.name}: kept {examples.height} of {encoded.n_candidates} candidates "
            f"({encoded.n_too_long} longer than {max_len} tokens)"
        )
        return MaterializeResult(
            metadata={
                "examples_rows": written["examples"],
                "tokens_rows": written["tokens"],
                "candidates": encoded.n_candidates,
                "dropped_too_long": encoded.n_too_long,
                "max_len": max_len,
                "seed": seed,
                "mean_tokens": MetadataValue.float(float(examples["n_tokens"].mean())),
                "preview": table_preview(examples.select("example_id", "source_ref", "n_tokens", "text_a", "text_b")),
            }
        )

    return corpus_asset


corpus_assets_by_name = {name: build_corpus_asset(spec) for name, spec in CORPORA.items()}
corpus_assets = list(corpus_assets_by_name.values())
