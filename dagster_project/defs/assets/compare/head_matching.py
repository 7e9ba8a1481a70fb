"""Head correspondence assets, one per corpus analysed for attention: the partition's
model against every other registered model with examples of the same corpus, heads matched by the
Jensen-Shannon distance of their word-level attention rows (compute.head_matching), written to
`head_matches`. The view `compare_head_matches` picks each head's nearest head in the other model."""

import duckdb
import polars as pl
from dagster import AssetExecutionContext, AssetsDefinition, Config, MaterializeResult, asset
from dagster_duckdb import DuckDBResource

from dagster_project.compute.compare.head_matching import DISTANCE_SCHEMA, MatchSide, distances_in_range, match_heads
from dagster_project.compute.models import load_encoder
from dagster_project.defs.assets.corpora import corpus_assets_by_name, model_tokens
from dagster_project.defs.assets.facts import fact_assets_by_corpus
from dagster_project.defs.assets.writing import check_specs, progress_logger, write_partition
from dagster_project.defs.partitions import model_partitions
from dagster_project.defs.pools import GPU_PASS_OP_TAGS, GPU_PASS_POOL
from dagster_project.defs.resources import ComputeResource
from dagster_project.defs.tags import corpus_tags
from dagster_project.storage.warehouse import partition_rows

WORD_COLUMNS = ("example_id", "word_index", "piece_start", "piece_end")
HEAD_MATCH_SCHEMA = {
    **DISTANCE_SCHEMA,
    "other_model_id": pl.String,
    "n_examples": pl.Int32,
    "n_words": pl.Int64,
}


class HeadMatchConfig(Config):
    # Shared examples compared (the first N by example_id): each costs one forward pass of both
    # models and (words x heads x other heads x words) distance terms.
    max_examples: int = 32
    other_models: list[str] = []  # partition keys to compare with; empty: every other model with the corpus


def models_with_corpus(conn: duckdb.DuckDBPyConnection, corpus: str) -> list[str]:
    """The registered models with examples of `corpus` (the current batch's rows)."""
    examples = conn.table("stg_examples").filter(duckdb.ColumnExpression("corpus") == duckdb.ConstantExpression(corpus))
    return sorted(row[0] for row in examples.select("model_id").distinct().fetchall())


def build_head_match_asset(corpus: str) -> AssetsDefinition:
    name = f"{corpus}_head_matches"

    @asset(
        name=name,
        description=(
            f"Every head of the model against every head of each other registered model with "
            f"'{corpus}' examples: mean Jensen-Shannon distance of their word-level attention rows on the shared "
            "examples (a second forward pass of both models on up to `max_examples` of them). Writes `head_matches`; "
            "no rows while the model is the only one with the corpus."
        ),
        partitions_def=model_partitions,
        deps=[corpus_assets_by_name[corpus], fact_assets_by_corpus[corpus]],
        group_name="facts",
        tags=corpus_tags(corpus, "attention"),
        pool=GPU_PASS_POOL,
        op_tags=GPU_PASS_OP_TAGS,
        check_specs=check_specs(
            name,
            {"distances_in_range": "Every js_distance is finite and in [0, sqrt(ln 2)], one row per head pair."},
        ),
    )
    def head_match_asset(
        context: AssetExecutionContext, config: HeadMatchConfig, warehouse: DuckDBResource, compute: ComputeResource
    ) -> MaterializeResult:
        model_id = context.partition_key
        with warehouse.get_connection() as conn:
            others = [other for other in models_with_corpus(conn, corpus) if other != model_id]
        unknown = sorted(set(config.other_models) - set(others))
        if unknown:
            raise ValueError(
                f"{name}: run config other_models names {unknown}, which have no '{corpus}' examples; "
                f"materialize {corpus}_examples for them first (models with them: {others or 'none'})."
            )
        others = [other for other in others if other in config.other_models] if config.other_models else others
        device = compute.resolve()

        def side(key: str) -> MatchSide:
            source, tokens = model_tokens(warehouse, key, corpus)
            with warehouse.get_connection() as conn:
                words = partition_rows(conn, "words", key, corpus, WORD_COLUMNS)
            return MatchSide(load_encoder(source, device), tokens, words)

        frames, compared, expected = [], {}, 0
        own = side(model_id) if others else None
        for other in others:
            their = side(other)
            matches = match_heads(own, their, config.max_examples, progress_logger(context, f"{name} vs {other}"))
            context.log.info(f"{other}: {matches.n_examples} shared examples, {matches.n_words} word rows")
            compared[other] = matches.n_examples
            expected += own.total_heads * their.total_heads
            frames.append(
                matches.distances.with_columns(
                    other_model_id=pl.lit(other),
                    n_examples=pl.lit(matches.n_examples, pl.Int32),
                    n_words=pl.lit(matches.n_words, pl.Int64),
                )
            )
        frame = pl.concat(frames) if frames else pl.DataFrame(schema=HEAD_MATCH_SCHEMA)
        return write_partition(
            context,
            warehouse,
            {"head_matches": frame},
            corpus,
            [distances_in_range(frame, expected)],
            {"compared_with": compared or "no other model has this corpus's examples"},
            frame,
        )

    return head_match_asset


head_match_assets_by_corpus = {name: build_head_match_asset(name) for name in fact_assets_by_corpus}
head_match_assets = list(head_match_assets_by_corpus.values())
