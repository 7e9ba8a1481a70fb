"""Head clustering (Clark §6, Fig. 6): every head of a model embedded in 2-D by MDS (Kruskal's
non-metric by default, as Clark cites) of the Jensen-Shannon divergences in `head_distances`,
written to `head_mds`."""

import polars as pl
from dagster import AssetExecutionContext, Config, MaterializeResult
from dagster_duckdb import DuckDBResource

from dagster_project.compute.checks import finite, one_row_per_head
from dagster_project.compute.clark.head_clustering import distance_matrix, embed_heads
from dagster_project.defs.assets.facts import fact_assets_by_corpus
from dagster_project.defs.assets.writing import model_partition_asset, write_partition
from dagster_project.defs.tags import analysis_tag
from dagster_project.storage.batches import partition_rows


class HeadMdsConfig(Config):
    corpus: str = "wiki_segments"  # a corpus whose attention facts fill head_distances
    # Clark §6 cites Kruskal's non-metric MDS (fits the distances' rank order); true: metric MDS (fits
    # the distances themselves; this project's embedding before). Recorded as head_mds.metric_mds.
    metric_mds: bool = False


@model_partition_asset(
    "head_mds",
    description=(
        "Clark et al. Fig. 6: each head embedded in 2-D by Kruskal's non-metric MDS (run config metric_mds: "
        "metric MDS; SMACOF from a classical-MDS start) of the mean Jensen-Shannon divergence per query token "
        "between heads (Clark's summed divergence / token count: the same layout up to scale). Writes `head_mds` "
        "with the embedding's Stress-1."
    ),
    deps=[fact_assets_by_corpus["wiki_segments"]],
    group_name="clark",
    tags=analysis_tag("clark"),
    checks={
        "finite_coordinates": "No NaN or inf in x, y and stress.",
        "one_row_per_head": "One row per (layer, head) of the model.",
    },
    model_pass=False,
)
def head_mds(context: AssetExecutionContext, config: HeadMdsConfig, warehouse: DuckDBResource) -> MaterializeResult:
    model_id, corpus = context.partition_key, config.corpus
    with warehouse.get_connection() as conn:
        rows = partition_rows(
            conn, "head_distances", model_id, corpus, ("layer_a", "head_a", "layer_b", "head_b", "js_sum", "tokens")
        )
    if rows.is_empty():
        raise ValueError(
            f"No head_distances rows for model '{model_id}' and corpus '{corpus}': materialize "
            f"{corpus}_attention_facts for this model first, or set the run config `corpus` to a corpus whose "
            "attention facts compute head distances (wiki_segments)."
        )
    with warehouse.get_connection() as conn:
        n_layers, n_heads = partition_rows(conn, "models", model_id, columns=("n_layers", "n_heads")).row(0)
    distances = distance_matrix(rows)
    embedding = embed_heads(distances.js_mean, config.metric_mds)
    kind = "metric" if embedding.metric else "non-metric"
    context.log.info(f"{corpus}: {distances.heads.height} heads embedded ({kind}), Stress-1 {embedding.stress:.3f}")
    frame = distances.heads.with_columns(
        x=pl.Series(embedding.xy[:, 0]),
        y=pl.Series(embedding.xy[:, 1]),
        stress=pl.lit(embedding.stress),
        metric_mds=pl.lit(embedding.metric),
    )
    return write_partition(
        context,
        warehouse,
        {"head_mds": frame},
        corpus,
        [finite(frame, ["x", "y", "stress"], "finite_coordinates"), one_row_per_head(frame, n_layers, n_heads)],
        {
            "corpus": corpus,
            "tokens": int(rows["tokens"].max()),
            "stress_1": round(embedding.stress, 4),
            "metric_mds": embedding.metric,
        },
        frame,
    )
