"""`attn-warehouse`: run the analyses for a model (one line per asset; the full log in a file),
reproduce the three papers, register models, query or export the warehouse, write the report, list
the results catalogue, open the UI, write the starter files. One module per verb, each with HELP,
add_arguments and command; VERBS lists them.

Sets DAGSTER_HOME to the .dagster folder beside the warehouse unless it is set, so partitions and
run history persist between commands and the UI.
"""

import argparse
import os
import signal
import sys
from importlib.metadata import version

from dagster_project.cli import (
    add_model,
    catalogue,
    data,
    export,
    init,
    pools,
    report,
    reproduce,
    run,
    scorecard,
    sql,
    ui,
)
from dagster_project.cli.common import RunInterrupted, UsageError, one_line, use_project_instance, user_error

VERBS = {
    "run": run,
    "reproduce": reproduce,
    "scorecard": scorecard,
    "add-model": add_model,
    "ui": ui,
    "report": report,
    "sql": sql,
    "export": export,
    "pools": pools,
    "catalogue": catalogue,
    "init": init,
    "data": data,
}


def main(argv: list[str] | None = None) -> int:
    """Run the verb `argv` (default: the command line) names and return the exit status: 2 for bad input
    and 1 for a corpus error or a warehouse locked or full, each said in one line; 130 when
    interrupted."""
    parser = argparse.ArgumentParser(prog="attn-warehouse", description=__doc__)
    parser.add_argument("--version", action="version", version=f"%(prog)s {version('attention-warehouse')}")
    commands = parser.add_subparsers(dest="command", required=True)
    words = sys.argv[1:] if argv is None else argv
    chosen = next((word for word in words if not word.startswith("-")), None)
    for name, verb in VERBS.items():
        verb_parser = commands.add_parser(name, help=verb.HELP)
        # Only the chosen verb's options: some import the asset graph and torch (seconds) for their
        # choices and defaults, which `sql` or `export` never need.
        if name == chosen:
            verb.add_arguments(verb_parser)
    args = parser.parse_args(argv)
    try:
        use_project_instance()
        status = VERBS[args.command].command(args)
        sys.stdout.flush()  # a reader gone before the last write shows here, not as a traceback at exit
        return status
    except UsageError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except RunInterrupted:
        return 130
    except BrokenPipeError:  # the reader went away (`attn-warehouse data list | head`): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the exit's flush must not fail again
        return 128 + signal.SIGPIPE
    except KeyboardInterrupt:  # Ctrl-C (or SIGTERM in a run) outside a run's steps
        print("interrupted: stopped; writes are whole or rolled back, so re-run to finish", file=sys.stderr)
        return 130
    except Exception as error:
        from dagster_project.compute.models import ModelLoadError
        from dagster_project.corpora import CorpusError
        from dagster_project.storage.connections import WarehouseFileError, WarehouseFullError, WarehouseLockedError
        from dagster_project.storage.lake import LakeConfigError

        _, cause = user_error(error)
        usage = (ModelLoadError, LakeConfigError, WarehouseFileError)
        if not isinstance(cause, (*usage, CorpusError, WarehouseLockedError, WarehouseFullError)):
            raise
        print(f"error: {one_line(cause)}", file=sys.stderr)
        return 2 if isinstance(cause, usage) else 1
