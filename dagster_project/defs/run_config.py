"""A run's config checked as the run would check it, before anything is registered, run or written:
Dagster's config types for the assets it configures, then the settings of each configured corpus
asset against the model (corpora.check_corpus_config: size, overlong, max_len within the model's
positions and the examples' columns). `run` and `run --dry-run` check through it alike
(run_planning.prepare_run), so a dry run fails where the run would, with the same line."""

from collections.abc import Sequence

from dagster import (
    AssetKey,
    AssetSelection,
    DagsterInvalidConfigError,
    Definitions,
    define_asset_job,
    validate_run_config,
)
from transformers import AutoConfig

from dagster_project.compute.models import inspect_model
from dagster_project.defs.assets import all_assets
from dagster_project.defs.assets.corpora import CorpusConfig, check_corpus_config, corpus_specs_by_key
from dagster_project.defs.resources import default_resources
from dagster_project.settings import models_cache_dir


class RunConfigError(ValueError):
    """A run config value the run would refuse: one line saying which, where and how to fix it."""


def check_run_config(run_config: dict, configured: Sequence[AssetKey], source: str) -> None:
    """Raise RunConfigError where `run_config` (of the assets `configured`) would fail the run of
    model `source`: a value of the wrong type or an unknown field (Dagster's message), or a corpus
    setting the corpus asset refuses (its own message)."""
    if not configured:
        return
    job = define_asset_job("run_config_check", selection=AssetSelection.assets(*configured))
    definitions = Definitions(assets=all_assets, jobs=[job], resources=default_resources())
    try:
        processed = validate_run_config(definitions.resolve_job_def(job.name), run_config)
    except DagsterInvalidConfigError as error:
        problems = "; ".join(" ".join(item.message.split()) for item in error.errors)
        raise RunConfigError(f"run config: {problems} (fix the --set or --config value)") from None
    corpora = [key for key in configured if key in corpus_specs_by_key]
    if not corpora:
        return
    model_config = AutoConfig.from_pretrained(inspect_model(source).resolved_path, cache_dir=models_cache_dir())
    for key in corpora:
        values = processed["ops"][key.to_user_string()]["config"]
        try:
            check_corpus_config(key, CorpusConfig(**values), model_config)
        except ValueError as error:
            raise RunConfigError(str(error)) from None
