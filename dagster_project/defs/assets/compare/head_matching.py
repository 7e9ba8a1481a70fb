"""Head correspondence assets, one per corpus analysed for attention: the partition's
model against every other registered model with examples of the same corpus, heads matched by the
Jensen-Shannon distance of their word-level attention rows (compute.head_matching), written to
`head_matches`. The view `compare_head_matches` picks each head's nearest head in the other model."""

from functools import partial

import duckdb
from dagster import AssetExecutionContext, AssetsDefinition, Config, MaterializeResult
from dagster_duckdb import DuckDBResource

from dagster_project.compute.compare.head_matching import MatchSide, distances_in_range, match_against_models
from dagster_project.compute.devices import ComputeDevice
from dagster_project.compute.models import load_encoder
from dagster_project.defs.assets.corpora import corpus_assets_by_name, examples_read, model_tokens
from dagster_project.defs.assets.facts import fact_assets_by_corpus
from dagster_project.defs.assets.writing import model_partition_asset, progress_logger, write_partition
from dagster_project.defs.resources import ComputeResource
from dagster_project.defs.tags import corpus_tags
from dagster_project.storage.batches import partition_rows

WORD_COLUMNS = ("example_id", "word_index", "piece_start", "piece_end")


class HeadMatchConfig(Config):
    # Shared examples compared (the first N by example_id): each costs one forward pass of both
    # models and (words x heads x other heads x words) distance terms.
    max_examples: int = 32
    other_models: list[str] = []  # partition keys to compare with; empty: every other model with the corpus


def models_with_corpus(conn: duckdb.DuckDBPyConnection, corpus: str) -> list[str]:
    """The registered models with examples of `corpus` (the current batch's rows)."""
    examples = conn.table("stg_examples").filter(duckdb.ColumnExpression("corpus") == duckdb.ConstantExpression(corpus))
    return sorted(row[0] for row in examples.select("model_id").distinct().fetchall())


def _models_to_compare(
    warehouse: DuckDBResource, asset_name: str, corpus: str, model_id: str, requested: list[str]
) -> list[str]:
    """The other models with the corpus's examples; only those `requested` (the run config's
    other_models) if any, each of which must have them."""
    with warehouse.get_connection() as conn:
        others = [other for other in models_with_corpus(conn, corpus) if other != model_id]
    unknown = sorted(set(requested) - set(others))
    if unknown:
        raise ValueError(
            f"{asset_name}: run config other_models names {unknown}, which have no '{corpus}' examples; "
            f"materialize {corpus}_examples for them first (models with them: {others or 'none'})."
        )
    return [other for other in others if other in requested] if requested else others


def _match_side(warehouse: DuckDBResource, corpus: str, device: ComputeDevice, model_id: str) -> MatchSide:
    """A model's encoder on `device` and its tokens and words of the corpus."""
    source, tokens = model_tokens(warehouse, model_id, corpus)
    with warehouse.get_connection() as conn:
        words = partition_rows(conn, "words", model_id, corpus, WORD_COLUMNS)
    return MatchSide(load_encoder(source, device), tokens, words)


def build_head_match_asset(corpus: str) -> AssetsDefinition:
    name = f"{corpus}_head_matches"

    @model_partition_asset(
        name,
        description=(
            f"Every head of the model against every head of each other registered model with "
            f"'{corpus}' examples: mean Jensen-Shannon distance of their word-level attention rows on the shared "
            "examples (a second forward pass of both models on up to `max_examples` of them). Writes `head_matches`; "
            "no rows while the model is the only one with the corpus."
        ),
        deps=[corpus_assets_by_name[corpus], fact_assets_by_corpus[corpus]],
        group_name="facts",
        tags=corpus_tags(corpus, "attention"),
        checks={"distances_in_range": "Every js_distance is finite and in [0, sqrt(ln 2)], one row per head pair."},
    )
    def head_match_asset(
        context: AssetExecutionContext, config: HeadMatchConfig, warehouse: DuckDBResource, compute: ComputeResource
    ) -> MaterializeResult:
        model_id = context.partition_key
        read = examples_read(context, warehouse, [corpus])  # this model's: the others' are theirs to replace
        others = _models_to_compare(warehouse, name, corpus, model_id, config.other_models)
        table = match_against_models(
            model_id,
            others,
            partial(_match_side, warehouse, corpus, compute.resolve()),
            config.max_examples,
            lambda other: progress_logger(context, f"{name} vs {other}"),
            context.log.info,
        )
        return write_partition(
            context,
            warehouse,
            {"head_matches": table.rows},
            corpus,
            [distances_in_range(table.rows, table.expected_rows)],
            {"compared_with": table.compared or "no other model has this corpus's examples"},
            table.rows,
            examples=read,
        )

    return head_match_asset


head_match_assets_by_corpus = {name: build_head_match_asset(name) for name in fact_assets_by_corpus}
head_match_assets = list(head_match_assets_by_corpus.values())
