"""Coreference baselines (Clark §4.3, Table 2): the antecedent each baseline system picks,
written per mention so the SQL views judge them beside the attention heads. One asset per
corpus with `coref_mentions` (OntoGUM, CoNLL-2012, GAP), run by the `clark` analysis for every
chosen one."""

from dagster import AssetExecutionContext, AssetsDefinition, MaterializeResult
from dagster_duckdb import DuckDBResource

from dagster_project.compute.checks import antecedents_precede_mentions
from dagster_project.compute.clark.coreference_baselines import predict_antecedents
from dagster_project.corpora import CORPORA
from dagster_project.corpora.coreference import mention_type_source
from dagster_project.defs.assets.corpora import corpus_assets_by_name, examples_read
from dagster_project.defs.assets.writing import model_partition_asset, write_partition
from dagster_project.defs.tags import corpus_tags
from dagster_project.storage.batches import partition_rows

COREFERENCE_CORPORA = tuple(name for name, spec in CORPORA.items() if "coref_mentions" in spec.annotations)
MENTION_TYPES = ("pronoun", "proper", "nominal")


def build_coreference_baselines(corpus: str) -> AssetsDefinition:
    name = f"{corpus}_coreference_baselines"

    @model_partition_asset(
        name,
        description=(
            f"Clark §4.3 baselines on {corpus}: the antecedent that the nearest, head-match and rule-based "
            "(Lee et al. 2011 sieves) systems pick for every mention. Writes `coref_baseline_predictions`."
        ),
        deps=[corpus_assets_by_name[corpus]],
        group_name="clark",
        tags=corpus_tags(corpus, "clark"),
        checks={
            "antecedents_precede_mentions": (
                "Each predicted antecedent is an earlier mention (ending before the mention starts) "
                "of the same example."
            )
        },
        model_pass=False,
    )
    def coreference_baselines(context: AssetExecutionContext, warehouse: DuckDBResource) -> MaterializeResult:
        model_id = context.partition_key
        read = examples_read(context, warehouse, [corpus])
        with warehouse.get_connection() as conn:
            mentions = partition_rows(conn, "coref_mentions", model_id, corpus)
            words = partition_rows(conn, "words", model_id, corpus, ("example_id", "word_index", "word"))
        if mentions.is_empty():
            raise ValueError(
                f"No coref_mentions for model '{model_id}' and corpus '{corpus}': materialize {corpus}_examples first."
            )
        types = dict(mentions["mention_type"].value_counts().iter_rows())
        source = mention_type_source(mentions)
        if not types.get("pronoun") and not types.get("proper"):
            context.log.warning(
                f"{corpus}: 0 pronoun and 0 proper mentions of {mentions.height} (mention types from {source}): "
                "Table 2's pronoun and proper rows will be empty; give the corpus a POS column (UPOS or PTB tags)."
            )
        predictions = predict_antecedents(mentions, words)
        context.log.info(f"{corpus}: {predictions.height} predictions for {mentions.height} mentions")
        return write_partition(
            context,
            warehouse,
            {"coref_baseline_predictions": predictions},
            corpus,
            [antecedents_precede_mentions(predictions, mentions)],
            {
                "mentions": mentions.height,
                "corpus": corpus,
                "mention_type_source": source,
                **{f"{kind}_mentions": types.get(kind, 0) for kind in MENTION_TYPES},
            },
            predictions,
            examples=read,
        )

    return coreference_baselines


coreference_baselines_by_corpus = {corpus: build_coreference_baselines(corpus) for corpus in COREFERENCE_CORPORA}
coreference_baselines_assets = list(coreference_baselines_by_corpus.values())
