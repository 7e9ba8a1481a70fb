"""Writes carried_code_versions.json, the carry-over of code versions from an older tree.

For each asset it maps the code version the asset had under the old tree ("before", e.g. the
flat layout of commit 551abcd, whose versions hashed file bytes) to the one the current scheme
gives it ("after"). The refresh schedule treats a materialization recorded with "before" as
current while the asset still hashes to "after" (schedules.StalenessCheck), so a warehouse
built before the reorganization is not recomputed, and any later edit makes it stale again.

Carrying is an assertion that the current code computes what the old tree computed; the file
records what backs it. "changed_definitions" lists, per group of assets, the top-level
definitions they compute with that the other tree has nowhere (hashed as versioning.py does, so
moves, renamed modules, comments, docstrings, imports and decorator metadata do not show):
what a reviewer checks (refactored, same results?). --only-unchanged carries only the assets
without such differences. Assets with their own code_version (the SQL hash of warehouse_views)
mean the same in both trees and are never carried.

Regenerate (e.g. at the end of the reorganization) with one command, from the repository root:

    .venv/bin/python -m dagster_project.defs.carry_code_versions --commit 551abcd

(or name a checkout of the old code instead of --commit; with neither, the source recorded in
the file is used again).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

from dagster_project.defs.versioning import CARRIED_CODE_VERSIONS, code_statements, statement_digest

REPOSITORY = Path(__file__).resolve().parents[2]
# Run inside the old tree (PYTHONPATH=<tree>, cwd=<tree>): its executable assets' code versions,
# only those its own scheme derived from code, and the files of the modules each was hashed from.
_OLD_TREE_SCRIPT = r"""
import importlib, inspect, json, sys
from pathlib import Path

import dagster_project

tree, assets_module, versioning_module = Path(sys.argv[1]).resolve(), sys.argv[2], sys.argv[3]
if not Path(dagster_project.__file__).resolve().is_relative_to(tree):
    sys.exit(f"dagster_project was imported from {dagster_project.__file__}, not from {tree}")
all_assets = importlib.import_module(assets_module).all_assets
versioning = importlib.import_module(versioning_module)
found = {}
for asset in all_assets:
    if not asset.is_executable:
        continue
    modules = versioning.computing_modules(asset)
    derived = versioning.modules_version(sorted(modules)) if modules else None
    for key in asset.keys:
        version = asset.get_asset_spec(key).code_version
        if version and version == derived:
            files = sorted(inspect.getfile(importlib.import_module(name)) for name in modules)
            found[key.to_user_string()] = {"version": version, "files": files}
print(json.dumps(found))
"""


def old_tree_versions(
    tree: Path,
    assets_module: str = "dagster_project.assets",
    versioning_module: str = "dagster_project.versioning",
) -> dict[str, dict]:
    """Asset key -> {"version", "files"} under the old tree, imported in a subprocess so that its
    modules do not mix with the current ones (the editable install maps modules missing from the
    tree to this checkout; the old modules all exist there, so they resolve to it)."""
    tree = tree.resolve()
    env = {**os.environ, "PYTHONPATH": str(tree), "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE")}
    done = subprocess.run(
        [sys.executable, "-c", _OLD_TREE_SCRIPT, str(tree), assets_module, versioning_module],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode:
        raise RuntimeError(f"importing the assets of {tree} failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def current_versions() -> dict[str, dict]:
    """Asset key -> {"version", "files"} under the current scheme, for code-derived versions."""
    from dagster_project.defs.assets import all_assets
    from dagster_project.defs.versioning import computed_code_version, computing_modules, module_file

    found = {}
    for asset in all_assets:
        if not asset.is_executable:
            continue
        derived = computed_code_version(asset)
        for key in asset.keys:
            version = asset.get_asset_spec(key).code_version
            if version and version == derived:
                files = sorted(str(module_file(name)) for name in computing_modules(asset) or ())
                found[key.to_user_string()] = {"version": version, "files": files}
    return found


def definitions(path: Path | str) -> dict[str, str]:
    """Statement digest -> a readable name (def/class name, assigned names, else the statement's
    start) for the top-level statements of a file, hashed as versioning.py hashes them."""
    import ast

    names = {}
    for statement in code_statements(Path(path).read_text(encoding="utf-8")):
        if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            name = statement.name
        elif isinstance(statement, ast.Assign | ast.AnnAssign):
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            name = ", ".join(ast.unparse(target) for target in targets)
        else:
            name = ast.unparse(statement).splitlines()[0][:60]
        names[statement_digest(statement)] = name
    return names


def differences(
    old: Mapping[str, dict], new: Mapping[str, dict], old_files: list[Path], new_files: list[Path]
) -> dict[str, dict[str, list[str]]]:
    """Per asset of both trees, the definitions it computes with that the other tree has
    nowhere: "old_only" (changed or removed), "current_only" (changed or added)."""
    old_everywhere = {digest for path in old_files for digest in definitions(path)}
    new_everywhere = {digest for path in new_files for digest in definitions(path)}
    found = {}
    for key in sorted(old.keys() & new.keys()):
        old_names = {digest: name for path in old[key]["files"] for digest, name in definitions(path).items()}
        new_names = {digest: name for path in new[key]["files"] for digest, name in definitions(path).items()}
        gone = sorted({name for digest, name in old_names.items() if digest not in new_everywhere})
        added = sorted({name for digest, name in new_names.items() if digest not in old_everywhere})
        if gone or added:
            found[key] = {"old_only": gone, "current_only": added}
    return found


def carry_over(
    old: Mapping[str, dict],
    new: Mapping[str, dict],
    changed: Mapping[str, dict[str, list[str]]],
    only_unchanged: bool = False,
) -> tuple[dict[str, dict[str, str]], dict[str, str]]:
    """The table (key -> {"before", "after"}) and the assets left out, with why."""
    table, left_out = {}, {}
    for key in sorted(old.keys() | new.keys()):
        if key not in new:
            left_out[key] = "not an asset of the current tree, or its code version is its own"
        elif key not in old:
            left_out[key] = "not versioned from code in the old tree"
        elif key in changed and only_unchanged:
            left_out[key] = "computes with changed definitions (see changed_definitions)"
        else:
            table[key] = {"before": old[key]["version"], "after": new[key]["version"]}
    return table, left_out


def grouped(changed: Mapping[str, dict[str, list[str]]]) -> list[dict[str, list[str]]]:
    """The differences, one entry per distinct difference with the assets that share it."""
    groups: dict[tuple[tuple[str, ...], tuple[str, ...]], list[str]] = {}
    for key, sides in changed.items():
        groups.setdefault((tuple(sides["old_only"]), tuple(sides["current_only"])), []).append(key)
    return [
        {"assets": keys, "old_only": list(gone), "current_only": list(added)}
        for (gone, added), keys in sorted(groups.items(), key=lambda item: item[1])
    ]


def _commit(tree: Path) -> str | None:
    done = subprocess.run(["git", "-C", str(tree), "rev-parse", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() or None


def _write(args: argparse.Namespace, tree: Path, source: dict) -> None:
    old = old_tree_versions(tree, args.assets_module, args.versioning_module)
    new = current_versions()
    old_files = sorted(tree.resolve().glob("dagster_project/**/*.py"))
    new_files = sorted((REPOSITORY / "dagster_project").glob("**/*.py"))
    changed = differences(old, new, old_files, new_files)
    table, left_out = carry_over(old, new, changed, args.only_unchanged)
    document = {
        "about": "Code versions recorded under an older tree (before) that stand for the current scheme's "
        "(after); written by `python -m dagster_project.defs.carry_code_versions`, see its docstring.",
        "before_from": source,
        "only_unchanged": args.only_unchanged,
        "assets": table,
        "not_carried": left_out,
        "changed_definitions": grouped(changed),
    }
    args.output.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    print(f"carried {len(table)} assets, left out {len(left_out)}: {args.output}")
    for key, why in left_out.items():
        print(f"  not carried: {key}: {why}")
    for group in document["changed_definitions"]:
        print(f"  changed definitions of {', '.join(group['assets'])}")
        for side in ("old_only", "current_only"):
            print(f"    {side}: {', '.join(group[side]) or '-'}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("old_tree", nargs="?", type=Path, help="a checkout of the old code")
    parser.add_argument("--commit", help="the old code's commit in this repository (extracted with git archive)")
    parser.add_argument("--only-unchanged", action="store_true", help="leave out assets with changed definitions")
    parser.add_argument("--assets-module", default="dagster_project.assets", help="the old tree's all_assets module")
    parser.add_argument("--versioning-module", default="dagster_project.versioning", help="the old tree's versioning")
    parser.add_argument("--output", type=Path, default=CARRIED_CODE_VERSIONS)
    args = parser.parse_args(argv)
    if args.old_tree is None and args.commit is None:
        previous = json.loads(args.output.read_text(encoding="utf-8")) if args.output.is_file() else {}
        recorded = previous.get("before_from", {})
        if recorded.get("tree") and Path(recorded["tree"]).is_dir():
            args.old_tree = Path(recorded["tree"])
        elif recorded.get("commit"):
            args.commit = recorded["commit"]
        else:
            parser.error("name the old tree or --commit")
    if args.old_tree is not None:
        _write(args, args.old_tree, {"tree": str(args.old_tree.resolve()), "commit": _commit(args.old_tree)})
        return
    commit = subprocess.run(
        ["git", "-C", str(REPOSITORY), "rev-parse", args.commit], capture_output=True, text=True, check=True
    ).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="carry-") as folder:
        archive = subprocess.run(["git", "-C", str(REPOSITORY), "archive", commit], capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", folder], input=archive.stdout, check=True)
        _write(args, Path(folder), {"tree": None, "commit": commit})


if __name__ == "__main__":
    main()
