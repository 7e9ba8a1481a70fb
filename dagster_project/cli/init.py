"""`attn-warehouse init`: write the starter files a user edits into the home folder (ATTN_HOME,
else the working directory): the models registry and the Dagster workspace. Files already there
are kept. (The instance settings are written into every new Dagster home by any verb.)"""

import argparse
import shutil

from dagster_project import settings

HELP = "write a starter models.toml and workspace.yaml into the home folder (ATTN_HOME, else here)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add nothing: `init` takes no options."""
    del parser  # no options


def command(args: argparse.Namespace) -> int:
    """Copy each starter file (models.toml, workspace.yaml) that the home folder lacks into it, and say
    what to do next; always 0."""
    del args
    home = settings.home()
    for name in settings.STARTER_FILES:
        target = home / name
        if target.exists():
            print(f"kept {target} (already there)")
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(settings.SHIPPED_DIR / name, target)
        print(f"wrote {target}")
    print(
        f"edit {home / 'models.toml'} to choose the models, then `attn-warehouse run` here (or with ATTN_HOME={home})"
    )
    return 0
