"""`attn-warehouse add-model MODEL`: register a model as a new partition without running anything."""

import argparse
import shlex
import sys

HELP = "register a model as a new partition"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add MODEL (hub id, local path or random-init control) and --language, the XNLI language it stands
    for in Pascual Fig. 4."""
    from dagster_project.corpora import XNLI_LANGUAGES

    parser.add_argument("model", help="hub id, local path or random-init:MODEL (its random-weights control)")
    parser.add_argument(
        "--language",
        choices=XNLI_LANGUAGES,
        help="the XNLI language the model stands for in Pascual Fig. 4 (as models.toml's `language`); "
        "left out, a language stored earlier is kept",
    )


def command(args: argparse.Namespace) -> int:
    """Register the MODEL of the parsed arguments; the exit status."""
    return add_model(args.model, args.language)


def add_model(source: str, language: str | None = None) -> int:
    """Register `source` as a model partition (with `language`, its XNLI language in Pascual Fig. 4) and
    say how to materialize it; 0, or 2 when the model cannot be loaded."""
    from dagster import DagsterInstance

    from dagster_project.compute.models import ModelLoadError
    from dagster_project.defs.registration import register_model
    from dagster_project.defs.resources import default_resources

    try:
        spec = register_model(source, DagsterInstance.get(), default_resources()["warehouse"], language)
    except ModelLoadError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(
        f"registered {spec.source} as partition {spec.model_id}"
        + (f" (the xnli_{language} model of Pascual Fig. 4)" if language else "")
        + "; "
        f"materialize it from the UI or `attn-warehouse run {shlex.quote(source)}`"
    )
    return 0
