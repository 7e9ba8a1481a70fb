"""`attn-warehouse run [MODEL]`: register a model and run the chosen analyses for it in one Dagster
run (one line per asset here; the full event log in a file), each checkpoint it fine-tunes in one run
of its own after it, then write the report."""

import argparse
from pathlib import Path

from dagster_project.cli.run_in_process import (
    checkpoint_plan_lines,
    checkpoint_step_names,
    chosen_corpora,
    execute_run,
    plan_run,
    print_outputs,
    run_checkpoints,
    run_config_from,
)

HELP = "register a model and materialize every asset for it"


def run(
    source: str,
    corpus_names: list[str],
    analysis_names: list[str],
    run_config: dict | None = None,
    verbose: bool = False,
    dry_run: bool = False,
) -> int:
    """Register `source` and run the chosen analyses for it on the chosen corpora, with the static
    report, in one run that leaves out what is materialized and not stale (the analyses' own targets
    are re-run). Prints one line per asset; the full event log goes to a file. Each checkpoint the run
    fine-tunes then gets a run of its own (on its task's corpus: attention facts, and on SST-2 the
    weighting faithfulness), and the report comes last. `dry_run`: print the plan and the steps it would
    run, register and write nothing."""
    run_config = run_config or {}
    prepared = plan_run(source, corpus_names, analysis_names, run_config, register=not dry_run)
    print(
        f"model {prepared.source} -> partition {prepared.model_id}; corpora: {', '.join(prepared.corpora)}; "
        f"analyses: {', '.join(analysis_names)}"
    )
    if prepared.up_to_date:
        print(f"up to date, not re-run: {', '.join(key.to_user_string() for key in prepared.up_to_date)}")
    for line in [*prepared.skipped, *([prepared.unheld] if prepared.unheld else [])]:
        print(line)
    if dry_run:
        print(f"would run {len(prepared.keys)} steps: {', '.join(prepared.step_names)}")
        for line in checkpoint_plan_lines(checkpoint_step_names(prepared)):
            print(line)
        return 0
    tasks = prepared.fine_tuned_tasks
    # with checkpoints to run, the report waits for them: its scorecard judges their claims too
    first = prepared.without_report() if tasks else prepared
    if first.keys and execute_run(first, run_config, verbose):
        return 1
    if tasks and (
        run_checkpoints(prepared.model_id, tasks, lambda _: run_config, verbose)
        or execute_run(prepared.report_only(), run_config, verbose)
    ):
        return 1
    print_outputs(prepared.model_id)
    return 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add MODEL, --corpus, --analysis, --hta, --config, --set, --dry-run and --verbose."""
    from dagster_project.compute.models import DEFAULT_MODEL
    from dagster_project.corpora import CORPORA, DEFAULT_CORPORA
    from dagster_project.defs.jobs import ANALYSES, DEFAULT_ANALYSES

    parser.add_argument(
        "model",
        nargs="?",
        default=DEFAULT_MODEL,
        help=f"hub id, local path or random-init:MODEL (its random-weights control; default {DEFAULT_MODEL})",
    )
    parser.add_argument(
        "--corpus",
        action="append",
        choices=[*CORPORA, "all"],
        help=f"corpus to process, repeatable; 'all' for every one the papers use (CoLA and WNLI only when named; "
        f"default: {', '.join(DEFAULT_CORPORA)})",
    )
    parser.add_argument(
        "--analysis",
        action="append",
        choices=list(ANALYSES),
        help="analysis to run, repeatable (default: "
        + ", ".join(DEFAULT_ANALYSES)
        + "); "
        + "; ".join(f"{name}: {analysis.description}" for name, analysis in ANALYSES.items()),
    )
    parser.add_argument(
        "--hta", action="store_true", help="add the hta analysis (Pascual's Hidden Token Attribution; slow)"
    )
    parser.add_argument(
        "--config",
        type=Path,
        metavar="FILE.yaml",
        help="run config in the launchpad's format: ops: {ASSET: {config: {FIELD: VALUE}}}",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="ASSET.FIELD=VALUE",
        help="one run config value, repeatable (after --config): xnli_en_hta_facts.max_examples=50, "
        "finetuned_mrpc.max_steps=40, finetuned_mrpc.train_subset=500",
    )
    parser.add_argument("--dry-run", action="store_true", help="print the plan, register and run nothing")
    parser.add_argument(
        "--verbose", action="store_true", help="stream Dagster's full event log (always written to the log file)"
    )


def command(args: argparse.Namespace) -> int:
    """Run the chosen analyses (default DEFAULT_ANALYSES, and hta with --hta) for MODEL on the chosen
    corpora, under the run config of --config and --set; the exit status."""
    from dagster_project.defs.jobs import DEFAULT_ANALYSES

    analyses = list(dict.fromkeys([*(args.analysis or DEFAULT_ANALYSES), *(["hta"] if args.hta else [])]))
    run_config = run_config_from(args.config, args.set)
    return run(args.model, chosen_corpora(args.corpus), analyses, run_config, args.verbose, args.dry_run)
