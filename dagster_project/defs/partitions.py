"""Models are dynamic partitions; keys are sanitized model sources (see models.model_key)."""

from dagster import DynamicPartitionsDefinition

model_partitions = DynamicPartitionsDefinition(name="models")
