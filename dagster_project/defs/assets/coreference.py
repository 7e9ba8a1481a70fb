"""Coreference baselines (Clark §4.3, Table 2): the antecedent each baseline system picks,
written per mention so the SQL views judge them beside the attention heads."""

from dagster import AssetExecutionContext, Config, MaterializeResult, asset
from dagster_duckdb import DuckDBResource

from dagster_project.compute.checks import antecedents_precede_mentions
from dagster_project.compute.coreference_baselines import predict_antecedents
from dagster_project.defs.assets.corpora import corpus_assets_by_name
from dagster_project.defs.assets.writing import check_specs, write_partition
from dagster_project.defs.partitions import model_partitions
from dagster_project.defs.tags import analysis_tag
from dagster_project.storage.warehouse import partition_rows


class CoreferenceBaselinesConfig(Config):
    corpus: str = "ontogum"  # a corpus with `coref_mentions` (ontogum, conll2012)


@asset(
    description=(
        "Clark §4.3 baselines: the antecedent that the nearest, head-match and rule-based "
        "(Lee et al. 2011 sieves) systems pick for every mention. Writes `coref_baseline_predictions`."
    ),
    partitions_def=model_partitions,
    deps=[corpus_assets_by_name["ontogum"]],
    group_name="clark",
    tags=analysis_tag("clark"),
    pool="warehouse_writer",
    check_specs=check_specs(
        "coreference_baselines",
        {
            "antecedents_precede_mentions": (
                "Each predicted antecedent is an earlier mention (ending before the mention starts) "
                "of the same example."
            )
        },
    ),
)
def coreference_baselines(
    context: AssetExecutionContext, config: CoreferenceBaselinesConfig, warehouse: DuckDBResource
) -> MaterializeResult:
    model_id, corpus = context.partition_key, config.corpus
    with warehouse.get_connection() as conn:
        mentions = partition_rows(conn, "coref_mentions", model_id, corpus)
        words = partition_rows(conn, "words", model_id, corpus, ("example_id", "word_index", "word"))
    if mentions.is_empty():
        raise ValueError(
            f"No coref_mentions for model '{model_id}' and corpus '{corpus}': materialize {corpus}_examples "
            "first, or set the run config `corpus` to a coreference corpus (ontogum, conll2012)."
        )
    predictions = predict_antecedents(mentions, words)
    context.log.info(f"{corpus}: {predictions.height} predictions for {mentions.height} mentions")
    return write_partition(
        context,
        warehouse,
        {"coref_baseline_predictions": predictions},
        corpus,
        [antecedents_precede_mentions(predictions, mentions)],
        {"mentions": mentions.height, "corpus": corpus},
        predictions,
    )
