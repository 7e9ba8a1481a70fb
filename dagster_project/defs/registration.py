"""Registering a model: validate it, record it in `models`, add its dynamic partition."""

from dataclasses import replace

from dagster import DagsterInstance
from dagster_duckdb import DuckDBResource

from dagster_project.compute.models import ModelSpec, inspect_model
from dagster_project.defs.partitions import model_partitions
from dagster_project.storage.model_rows import upsert_model


def register_model(
    source: str, instance: DagsterInstance, warehouse: DuckDBResource, language: str | None = None
) -> ModelSpec:
    """Check `source` is a loadable attention encoder (config + tokenizer), then make it a
    partition, with the XNLI `language` it stands for (None keeps the stored one). Raises
    ModelLoadError, with nothing written, when it is not."""
    spec = replace(inspect_model(source), language=language)
    with warehouse.get_connection() as conn:
        upsert_model(conn, spec)
    if not instance.has_dynamic_partition(model_partitions.name, spec.model_id):
        instance.add_dynamic_partitions(model_partitions.name, [spec.model_id])
    return spec
