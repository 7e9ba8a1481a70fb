"""The passes that run a model, listed independently of defs/pools.py: each asks for a GPU and,
off the duckdb backend, is in the gpu pool."""

from dagster_project.defs.assets import (
    dependency_probes,
    fact_assets_by_corpus,
    grad_importance,
    head_match_assets_by_corpus,
    hta_assets_by_corpus,
    similarity_assets_by_task,
    weighting_faithfulness_asset,
)
from dagster_project.defs.assets.kovaleva.finetuning import finetuning_assets

GPU_PASSES = [
    *fact_assets_by_corpus.values(),
    *hta_assets_by_corpus.values(),
    *head_match_assets_by_corpus.values(),  # two models' forward passes
    grad_importance,
    dependency_probes,
    *finetuning_assets,
    *similarity_assets_by_task.values(),
    weighting_faithfulness_asset,  # a classifier's forward and backward
]
