"""`attn-warehouse reproduce [MODEL ...]`: every result of the three papers for the chosen models, in
one Dagster run per model: every corpus of docs/methods.md §2 that is present, every analysis, the
papers' settings (`--quick`: reduced sizes, defs/reproduction.py). It prints the plan first (each
step, its size and estimated time, and the total); `--dry-run` stops there. A second call skips what
is current; a paper reproduction after a quick one recomputes everything. `--control random-init` follows
each model with its random-weights control (random-init:MODEL), reproduced alike."""

import argparse
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from dagster_project.cli.common import UsageError
from dagster_project.cli.run_in_process import (
    checkpoint_plan_lines,
    checkpoint_step_names,
    execute_run,
    plan_run,
    print_outputs,
    run_checkpoints,
    run_config_from,
)

if TYPE_CHECKING:
    from dagster_project.defs.reproduction import ModelShape

LISTED_SECONDS = 10  # steps estimated shorter are summed in one line of the plan
HELP = "every result of the three papers for the chosen models (--quick: reduced sizes), plan and estimates first"


def _model_shape(source: str) -> "ModelShape":
    """The model's size, and how many examples of each corpus capped at d_head fit it (its tokenizer's count)."""
    from transformers import AutoConfig, AutoTokenizer

    from dagster_project.compute.models import inspect_model
    from dagster_project.defs.assets.corpora import head_dimension
    from dagster_project.defs.reproduction import ModelShape, examples_that_fit

    spec = inspect_model(source)
    config = AutoConfig.from_pretrained(spec.resolved_path)
    tokenizer = AutoTokenizer.from_pretrained(spec.resolved_path)
    fitting = examples_that_fit(tokenizer, head_dimension(config))
    return ModelShape(spec.n_layers, config.hidden_size, spec.n_heads, fitting)


def _stored_profile(model_id: str) -> str | None:
    """The profile of the model's last reproduction, read without creating a warehouse."""
    from dagster_project.defs.resources import default_resources
    from dagster_project.storage.backend import WarehouseConfig
    from dagster_project.storage.model_rows import reproduction_profile

    if not WarehouseConfig.from_env().exists():
        return None
    with default_resources()["warehouse"].get_connection() as conn:
        return reproduction_profile(conn, model_id)


def _record(model_id: str, profile: str, finished: bool) -> None:
    from dagster_project.defs.resources import default_resources
    from dagster_project.storage.model_rows import record_reproduction

    with default_resources()["warehouse"].get_connection() as conn:
        record_reproduction(conn, model_id, profile, finished)


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.0f} s"


def print_plan(source: str, model_id: str, steps: list, up_to_date: list, skipped: list[str], device: str) -> float:
    """The model's plan: one line per step estimated at LISTED_SECONDS or more, with its size, the
    others summed in one line; returns the total seconds. The total counts an HTA step at exact HTA's
    cost where its estimator is expected to miss its check (PlannedStep.fallback_reason), saying why,
    and gives the other outcome of the check on a line of its own."""
    print(f"\n{source} -> partition {model_id}: {len(steps)} steps to run, {len(up_to_date)} current (skipped)")
    listed = sorted(
        (step for step in steps if step.expected_seconds >= LISTED_SECONDS), key=lambda step: -step.expected_seconds
    )
    for step in listed:
        size = f"{step.units} {step.unit}" if step.unit != "steps" else ""
        exact = " (exact)" if step.fallback_reason else ""
        print(f"  {step.asset:<44} {size:>26} {_minutes(step.expected_seconds):>10}{exact}")
    rest = [step for step in steps if step.expected_seconds < LISTED_SECONDS]
    if rest:
        label = f"{len(rest)} shorter steps (corpora, charts, views, the report)"
        print(f"  {label:<71} {_minutes(sum(step.expected_seconds for step in rest)):>10}")
    for line in skipped:
        print(f"  {line}")
    total = sum(step.expected_seconds for step in steps)
    note = "" if device == "cpu" else f" (rates measured on 2 CPU cores: an upper bound on {device})"
    expected = [step for step in steps if step.fallback_reason]
    unexpected = [step for step in steps if step.fallback_seconds is not None and not step.fallback_reason]
    if expected:
        print(f"  estimated: {_minutes(total)}{note}, HTA by exact where its estimator is expected to miss its check:")
        for step in expected:
            print(f"    {step.asset}: {step.fallback_reason}")
        best = total - sum(step.fallback_seconds - step.seconds for step in expected)
        names = ", ".join(step.asset for step in expected)
        print(f"  where HTA's estimator passes its check instead ({names}): {_minutes(best)}")
    else:
        print(f"  estimated: {_minutes(total)}{note}")
    if unexpected:
        worst = total + sum(step.fallback_seconds - step.seconds for step in unexpected)
        names = ", ".join(step.asset for step in unexpected)
        print(f"  where HTA's estimator misses its check and falls back to exact ({names}): {_minutes(worst)}")
    return total


def with_user_config(profile_config: dict, user_config: dict) -> dict:
    """The profile's run config with the user's values (--config, --set) over it, field by field."""
    ops = {asset: {"config": dict(op.get("config", {}))} for asset, op in profile_config.get("ops", {}).items()}
    for asset, op in user_config.get("ops", {}).items():
        ops.setdefault(asset, {"config": {}})["config"].update(op.get("config", {}))
    return {**user_config, "ops": ops} if ops else dict(user_config)


def _profile_config(step_names: list[str], profile: str, user_config: dict) -> dict:
    """The run config of a run of `step_names` under `profile`, with the user's values over it."""
    from dagster_project.defs.reproduction import profile_run_config

    return with_user_config(profile_run_config(step_names, profile), user_config)


def _planned_steps(names: list[str], profile: str, shape: "ModelShape", ops: dict) -> list:
    """Each step of `names` planned under `profile` with its run config from `ops` (the run's, per asset)."""
    from dagster_project.defs.reproduction import planned_step

    return [planned_step(name, profile, shape, ops.get(name, {}).get("config", {})) for name in names]


def _print_checkpoint_runs(
    checkpoints: list[tuple[str, list[str]]], total: float, profile: str, shape: "ModelShape", user_config: dict
) -> None:
    """The runs after the model's own: each checkpoint's, then what compares models on their corpora once
    more (the report, which waits for them, is in the model's total already); their time and the total."""
    for line in checkpoint_plan_lines(checkpoints):
        print(f"  {line}")
    print("  and again the steps that compare models on those corpora, and the report")
    after = [name for _, names in checkpoints for name in names]
    after += sorted({name for name in after if name.endswith("head_matches")})
    ops = _profile_config(after, profile, user_config).get("ops", {})
    seconds = sum(step.seconds for step in _planned_steps(after, profile, shape, ops))
    print(f"  those runs: {_minutes(seconds)}; in all: {_minutes(total + seconds)}")


def reproduce(sources: list[str], profile: str, dry_run: bool, verbose: bool, user_config: dict | None = None) -> int:
    """Plan every model's reproduction, print the plans and, unless `dry_run`, run them in turn;
    `user_config` (run config in the launchpad's format) goes over the profile's."""
    from dagster import DagsterInstance

    from dagster_project.compute.devices import resolve
    from dagster_project.corpora import PAPER_CORPORA
    from dagster_project.defs.jobs import ANALYSES
    from dagster_project.defs.reproduction import with_expected_fallbacks
    from dagster_project.settings import compute_device, compute_dtype

    user_config = user_config or {}
    device = resolve(compute_device(), compute_dtype()).device.type
    analyses = list(ANALYSES)
    plans = []
    for source in sources:
        planned = plan_run(source, list(PAPER_CORPORA), analyses, user_config, rerun_targets=False, register=False)
        upgrade = profile == "paper" and _stored_profile(planned.model_id) == "quick"
        if upgrade:
            print(f"{source}: its last reproduction was quick; the paper profile recomputes every step")
        shape = _model_shape(source)
        ops = _profile_config(planned.step_names, profile, user_config).get("ops", {})
        steps = with_expected_fallbacks(
            _planned_steps(planned.step_names, profile, shape, ops), DagsterInstance.get(), planned.model_id, ops
        )
        total = print_plan(source, planned.model_id, steps, planned.up_to_date, planned.skipped, device)
        if checkpoints := checkpoint_step_names(planned):
            _print_checkpoint_runs(checkpoints, total, profile, shape, user_config)
        plans.append((source, upgrade))
    if dry_run:
        return 0
    for source, upgrade in plans:
        # Planned again, registered: the run config covers what this plan runs.
        prepared = plan_run(source, list(PAPER_CORPORA), analyses, user_config, rerun_targets=False, rerun_all=upgrade)
        run_config = _profile_config(prepared.step_names, profile, user_config)
        print(f"\nreproducing {source} ({profile})")
        # A quick reproduction is recorded as started, so a paper one after it recomputes everything
        # even where it stopped midway; the profile labels the rows only once they are all its (below).
        if profile == "quick":
            _record(prepared.model_id, profile, finished=False)
        # The report is written once, at the end, when the checkpoints' claims can be judged too.
        if execute_run(prepared.without_report(), run_config, verbose):
            return 1
        # The user's values reach the assets each checkpoint's run has (own_config leaves out a fine-tuning setting's).
        configs = partial(_profile_config, profile=profile, user_config=user_config)
        if run_checkpoints(prepared.model_id, prepared.fine_tuned_tasks, configs, verbose, upgrade):
            return 1
        # Every row of the model is this profile's now: recorded before the run that writes the report,
        # which labels the results by it. A paper run stopped before here leaves the last finished profile
        # recorded, so after a quick one the next paper run still recomputes everything.
        _record(prepared.model_id, profile, finished=True)
        # The checkpoints are models on the base's corpora too: what compares models there (head
        # matching, its charts) and the report, whose scorecard now judges the fine-tuned claims, are
        # stale until run again.
        settled = plan_run(source, list(PAPER_CORPORA), analyses, user_config, rerun_targets=False)
        names = settled.step_names
        print(f"\nnow that the checkpoints' facts are in: {', '.join(names)}")
        if execute_run(settled, _profile_config(names, profile, user_config), verbose):
            return 1
        print_outputs(prepared.model_id)
    return 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add MODEL..., --control, --quick, --dry-run, --config, --set and --verbose."""
    from dagster_project.compute.controls import RANDOM_INIT
    from dagster_project.compute.models import DEFAULT_MODEL

    parser.add_argument(
        "models",
        nargs="*",
        default=[DEFAULT_MODEL],
        help=f"hub ids, local paths or random-init:MODEL controls (default {DEFAULT_MODEL})",
    )
    parser.add_argument(
        "--control",
        action="append",
        default=[],
        metavar="KIND",
        help=f"after each MODEL, its control, run alike: {RANDOM_INIT} (MODEL's architecture and tokenizer with "
        f"seeded random weights, the source {RANDOM_INIT}:MODEL)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="every result at reduced sizes (200 examples per corpus; 2 for HTA per language, by exact HTA; "
        "12 fine-tuning steps); the plan prints the time it expects",
    )
    parser.add_argument("--dry-run", action="store_true", help="print the plan and its estimates, run nothing")
    parser.add_argument(
        "--config", type=Path, metavar="FILE.yaml", help="run config over the profile's (the launchpad's format)"
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="ASSET.FIELD=VALUE",
        help="one run config value over the profile's, repeatable: xnli_en_hta_facts.hta_method=exact",
    )
    parser.add_argument("--verbose", action="store_true", help="stream Dagster's full event log")


def with_controls(sources: list[str], kinds: list[str]) -> list[str]:
    """Each source followed by its control of each kind (`--control`), each model once."""
    from dagster_project.compute.controls import CONTROL_KINDS

    if unknown := [kind for kind in kinds if kind not in CONTROL_KINDS]:
        raise UsageError(f"--control {unknown[0]}: no such control; the control kinds are {', '.join(CONTROL_KINDS)}")
    return list(dict.fromkeys(f"{kind}:{name}" if kind else name for name in sources for kind in ["", *kinds]))


def command(args: argparse.Namespace) -> int:
    """Reproduce the papers for each named model and its --control models, with the paper profile (or the
    quick one, --quick) under the run config of --config and --set; a UsageError when a model is named
    twice."""
    if len(set(args.models)) != len(args.models):
        raise UsageError("a model is named twice")
    user_config = run_config_from(args.config, args.set)
    sources = with_controls(args.models, args.control)
    return reproduce(sources, "quick" if args.quick else "paper", args.dry_run, args.verbose, user_config)
