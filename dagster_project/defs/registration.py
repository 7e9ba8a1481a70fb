"""Registering a model: validate it, record it in `models`, add its dynamic partition."""

from dagster import DagsterInstance
from dagster_duckdb import DuckDBResource

from dagster_project.compute.models import ModelSpec, inspect_model
from dagster_project.defs.partitions import model_partitions
from dagster_project.storage.warehouse import upsert_model


def register_model(source: str, instance: DagsterInstance, warehouse: DuckDBResource) -> ModelSpec:
    """Check `source` is a loadable attention encoder (config + tokenizer), then make it a
    partition. Raises ModelLoadError, with nothing written, when it is not."""
    spec = inspect_model(source)
    with warehouse.get_connection() as conn:
        upsert_model(conn, spec)
    if not instance.has_dynamic_partition(model_partitions.name, spec.model_id):
        instance.add_dynamic_partitions(model_partitions.name, [spec.model_id])
    return spec
