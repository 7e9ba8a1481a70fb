"""The model asset: loads a registered model's weights and records what it is."""

import time

from dagster import AssetExecutionContext, MaterializeResult, MetadataValue, asset
from dagster_duckdb import DuckDBResource

from dagster_project.compute.models import load_encoder
from dagster_project.defs.partitions import model_partitions
from dagster_project.defs.pools import WRITER_POOL
from dagster_project.storage.model_rows import model_source, upsert_model


@asset(partitions_def=model_partitions, group_name="models", pool=WRITER_POOL)
def encoder_model(context: AssetExecutionContext, warehouse: DuckDBResource) -> MaterializeResult:
    """Loads the partition's model (eager attention, fp32, eval), checks it returns attention
    maps, and refreshes its row in the `models` table (revision, layers, heads)."""
    with warehouse.get_connection() as conn:
        source = model_source(conn, context.partition_key)
    started = time.perf_counter()
    encoder = load_encoder(source)
    seconds = time.perf_counter() - started
    with warehouse.get_connection() as conn:
        upsert_model(conn, encoder.spec)
    spec = encoder.spec
    context.log.info(f"Loaded {source} ({spec.n_layers} layers x {spec.n_heads} heads) in {seconds:.1f}s")
    return MaterializeResult(
        metadata={
            "source": spec.source,
            "loaded_from": MetadataValue.path(spec.resolved_path),
            "revision": spec.revision,
            "model_type": spec.model_type,
            "n_layers": spec.n_layers,
            "n_heads": spec.n_heads,
            "takes_token_types": spec.takes_token_types,
            "n_parameters": sum(p.numel() for p in encoder.model.parameters()),
            "load_seconds": round(seconds, 2),
        }
    )
