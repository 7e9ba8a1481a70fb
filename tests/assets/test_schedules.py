import importlib
import os
import sys
import textwrap
from pathlib import Path

import pytest
from dagster import (
    AssetKey,
    AssetsDefinition,
    AssetSpec,
    DagsterInstance,
    RunRequest,
    ScheduleDefinition,
    SkipReason,
    asset,
    build_schedule_context,
    instance_for_test,
    materialize,
)
from dagster_duckdb import DuckDBResource

from dagster_project.compute.models import model_key
from dagster_project.defs import versioning
from dagster_project.defs.assets import all_assets
from dagster_project.defs.partitions import model_partitions
from dagster_project.defs.registration import register_model
from dagster_project.defs.resources import ChartFolder, ComputeResource, DataDirectory
from dagster_project.defs.schedules import build_refresh_schedule, record_corpus_files, refresh_plan
from dagster_project.defs.versioning import (
    computed_code_version,
    computing_modules,
    corpus_files_assets,
    corpus_files_key,
    modules_version,
    versioned_assets,
)
from dagster_project.storage.sql_files import sql_code_version


@pytest.fixture
def instance() -> DagsterInstance:
    with instance_for_test() as test_instance:
        yield test_instance


def with_code_version(assets: list, name: str, code_version: str) -> list:
    return [
        item.map_asset_specs(
            lambda spec: spec.replace_attributes(code_version=code_version) if spec.key == AssetKey(name) else spec
        )
        if hasattr(item, "map_asset_specs")
        else item
        for item in assets
    ]


def specs_by_key(assets: list[AssetsDefinition]) -> dict[AssetKey, AssetSpec]:
    return {key: item.get_asset_spec(key) for item in assets for key in item.keys if item.is_executable}


def test_a_new_code_version_makes_only_that_asset_stale(
    instance: DagsterInstance, tmp_path: Path, tiny_model_dir: Path
) -> None:
    resources = {
        "warehouse": DuckDBResource(database=str(tmp_path / "warehouse.duckdb")),
        "data_dir": DataDirectory(path=str(tmp_path / "no-data")),
        "chart_folder": ChartFolder(path=str(tmp_path / "charts")),
        "compute": ComputeResource(),
    }
    assets = all_assets
    tiny = register_model(str(tiny_model_dir), instance, resources["warehouse"]).model_id
    assert tiny == model_key(str(tiny_model_dir))
    materialize(assets, selection=["warehouse_views"], instance=instance, resources=resources)
    chosen = ["encoder_model", "demo_examples", "demo_attention_facts", "clark_fig2_special_tokens", "paper_report"]
    materialize(assets, selection=chosen, partition_key=tiny, instance=instance, resources=resources)
    assert refresh_plan(instance, assets).selections == {}

    edited = with_code_version(assets, "demo_attention_facts", "edited")
    plan = refresh_plan(instance, edited)
    assert plan.stale == {tiny: [AssetKey("demo_attention_facts")]}
    # The chart drawn from those facts is re-run with them, and the report showing it; the model
    # and corpus are not.
    assert plan.selections == {
        tiny: [AssetKey("clark_fig2_special_tokens"), AssetKey("demo_attention_facts"), AssetKey("paper_report")]
    }

    # A stale view file goes first, alone: the per-model runs wait for the next tick.
    views_edited = with_code_version(edited, "warehouse_views", "new-sql")
    assert refresh_plan(instance, views_edited).selections == {
        None: [AssetKey("paper_report"), AssetKey("warehouse_views")]
    }


@asset(
    key="wiki_segments_examples",
    deps=[corpus_files_key("wiki_segments")],
    partitions_def=model_partitions,
    code_version="1",
)
def wiki_examples() -> None:
    pass


@asset(key="wiki_segments_attention_facts", deps=[wiki_examples], partitions_def=model_partitions, code_version="1")
def wiki_facts() -> None:
    pass


@asset(key="demo_examples", partitions_def=model_partitions, code_version="1")
def demo_examples() -> None:
    pass


def tick(refresh: ScheduleDefinition, instance: DagsterInstance, resources: dict) -> list[RunRequest] | SkipReason:
    """One evaluation of the schedule. The context is closed here: the instance it opens sets
    Dagster's current definitions-state storage, which a later garbage collection would reset
    to a disposed instance's in some other test."""
    with build_schedule_context(instance=instance, resources=resources) as context:
        return refresh(context)


def test_changed_corpus_files_make_their_corpus_stale(instance: DagsterInstance, tmp_path: Path) -> None:
    wiki = tmp_path / "data" / "wikipedia" / "wikitext2_raw_wiki.test.raw"
    wiki.parent.mkdir(parents=True)
    wiki.write_text(" = Section = \n first paragraph \n")
    resources = {"data_dir": DataDirectory(path=str(tmp_path / "data"))}
    assets = [*corpus_files_assets, wiki_examples, wiki_facts, demo_examples]
    refresh = build_refresh_schedule(assets)
    instance.add_dynamic_partitions(model_partitions.name, ["a"])
    # Materialized before the files were ever reported: the first report is the baseline.
    materialize(
        assets,
        selection=[wiki_examples, wiki_facts, demo_examples],
        partition_key="a",
        instance=instance,
        resources=resources,
    )
    assert corpus_files_key("wiki_segments") in record_corpus_files(instance, resources["data_dir"])
    assert record_corpus_files(instance, resources["data_dir"]) == []
    assert refresh_plan(instance, assets).selections == {}
    assert tick(refresh, instance, resources).skip_message == "nothing is stale"

    # The same bytes written again (new modification time, as a data folder provisioned anew): still current.
    wiki.write_text(" = Section = \n first paragraph \n")
    os.utime(wiki, ns=(wiki.stat().st_atime_ns, wiki.stat().st_mtime_ns + 10**9))
    assert record_corpus_files(instance, resources["data_dir"]) == []

    wiki.write_text(" = Section = \n first paragraph, edited \n")
    requests = tick(refresh, instance, resources)
    assert [(request.partition_key, request.asset_selection) for request in requests] == [
        ("a", [AssetKey("wiki_segments_attention_facts"), AssetKey("wiki_segments_examples")])
    ]
    assert refresh_plan(instance, assets).stale == {"a": [AssetKey("wiki_segments_examples")]}

    materialize(
        assets, selection=requests[0].asset_selection, partition_key="a", instance=instance, resources=resources
    )
    assert refresh_plan(instance, assets).selections == {}


def tiny_pair(upstream_version: str, downstream_version: str) -> list[AssetsDefinition]:
    """Two tiny assets, `upstream` feeding `downstream`, with the given code versions."""

    @asset(key="upstream", code_version=upstream_version)
    def upstream() -> None:
        pass

    @asset(key="downstream", deps=[upstream], code_version=downstream_version)
    def downstream() -> None:
        pass

    return [upstream, downstream]


def write_modules(folder: Path, sources: dict[str, str]) -> None:
    for stale in folder.glob("*.py"):
        stale.unlink()
    for name, source in sources.items():
        (folder / f"{name}.py").write_text(textwrap.dedent(source))
    importlib.invalidate_caches()


COUNTS = """
def counts(words):
    return Counter(word for word in words if word in WORD_MODES)
"""
MODULE_A = (
    textwrap.dedent(
        '''
        """Counts."""
        import math
        from collections import Counter

        from dagster_project.compute.metrics import WORD_MODES

        SCALE = 2


        def scaled_root(x):
            """The scaled square root."""
            return math.sqrt(x) * SCALE  # scaled
        '''
    )
    + COUNTS
)
MODULE_B = """
def shifted(x):
    return x + 1
"""


def test_code_versions_hash_statements_not_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    write_modules(tmp_path, {"probe_a": MODULE_A, "probe_b": MODULE_B})
    version = modules_version(["probe_a", "probe_b"])
    assert modules_version(["probe_b", "probe_a", "probe_b"]) == version

    # Comments, docstrings, formatting and import lines (where code lives) do not count.
    cosmetic = (
        MODULE_A.replace('"""Counts."""', '"""Counts words."""')
        .replace("# scaled", "# scaled by SCALE")
        .replace('"""The scaled square root."""', "")
        .replace("compute.metrics import", "compute.word_modes import")
        .replace("import math\n", "import math  # noqa\n")
        .replace("if word in WORD_MODES", "if (word in WORD_MODES)")
    )
    assert cosmetic.count("compute.word_modes") == cosmetic.count("if (word") == 1
    write_modules(tmp_path, {"probe_a": cosmetic, "probe_b": MODULE_B})
    assert modules_version(["probe_a", "probe_b"]) == version

    # Any statement that computes does.
    write_modules(tmp_path, {"probe_a": MODULE_A.replace("SCALE = 2", "SCALE = 3"), "probe_b": MODULE_B})
    assert modules_version(["probe_a", "probe_b"]) != version
    write_modules(tmp_path, {"probe_a": MODULE_A.replace("x) * SCALE", "x) / SCALE"), "probe_b": MODULE_B})
    assert modules_version(["probe_a", "probe_b"]) != version

    # Moving a function to the other module, then renaming that module, changes nothing.
    moved_a = MODULE_A.replace(COUNTS, "\nfrom probe_b import counts\n")
    moved_b = "from collections import Counter\n" + MODULE_B + "\n" + COUNTS
    assert moved_a != MODULE_A
    write_modules(tmp_path, {"probe_a": moved_a, "probe_b": moved_b})
    assert modules_version(["probe_a", "probe_b"]) == version
    write_modules(tmp_path, {"probe_a": moved_a, "probe_c": moved_b})
    assert modules_version(["probe_a", "probe_c"]) == version


def test_decorator_metadata_is_not_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where an asset is shown and how it is selected (group, tags, description) is not what it
    computes; its config is."""
    monkeypatch.syspath_prepend(str(tmp_path))
    source = "@asset(group_name={group!r}, tags={tags!r}, config_schema={{'n': int}})\ndef a():\n    return 1\n"

    def version(**fields: object) -> str:
        write_modules(tmp_path, {"probe_decorated": source.format(**{"group": "g", "tags": {}, **fields})})
        return modules_version(["probe_decorated"])

    assert version(group="clark", tags={"analysis": "attention"}) == version()
    write_modules(tmp_path, {"probe_decorated": source.format(group="g", tags={}).replace("int", "float")})
    assert modules_version(["probe_decorated"]) != version()


PROBE_ASSETS = """
    from dagster import asset

    from {package}.{helpers} import scaled
    from {package}.registry import TABLES
    from {package}.plumbing import WAREHOUSE


    @asset
    def probe_asset():
        \"\"\"Writes scaled rows.\"\"\"
        return [scaled(row) for row in TABLES] + [WAREHOUSE]
"""
PROBE_HELPERS = """
    FACTOR = {factor}


    def scaled(x):
        return x * FACTOR
"""


def test_asset_code_versions_survive_moving_the_code_they_use(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The walk from an asset's module reaches the modules of the functions it imports and of
    imported registries (TABLES), not plumbing; moving a helper between modules keeps the version."""
    package = f"probe_{tmp_path.name.replace('-', '_')}"
    folder = tmp_path / package
    folder.mkdir()
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    monkeypatch.setattr(versioning, "PROJECT", package)
    monkeypatch.setattr(versioning, "ASSET_MODULES", f"{package}.assets")
    monkeypatch.setattr(versioning, "PLUMBING", frozenset({f"{package}.plumbing"}))

    def version(helpers: str, factor: int = 2) -> tuple[set[str], str]:
        write_modules(
            folder,
            {
                "__init__": "",
                "assets": PROBE_ASSETS.format(package=package, helpers=helpers),
                helpers: PROBE_HELPERS.format(factor=factor),
                "registry": f"from {package}.{helpers} import scaled\n\nTABLES = [scaled(1), 2]\n",
                "plumbing": "WAREHOUSE = 'warehouse.duckdb'\n",
            },
        )
        for name in [name for name in sys.modules if name.startswith(package)]:
            del sys.modules[name]
        probe_asset = importlib.import_module(f"{package}.assets").probe_asset
        modules = {name.removeprefix(f"{package}.") for name in computing_modules(probe_asset)}
        return modules, computed_code_version(probe_asset)

    modules, first = version("helpers")
    assert modules == {"assets", "helpers", "registry"}  # plumbing stays out
    moved_modules, moved = version("compute_helpers")
    assert moved_modules == {"assets", "compute_helpers", "registry"}
    assert moved == first
    assert version("helpers", factor=3)[1] != first


def test_code_versions_hash_the_modules_each_asset_computes_with() -> None:
    by_name = {asset.key.path[-1]: asset for asset in all_assets if asset.is_executable and len(asset.keys) == 1}
    fact_modules = computing_modules(by_name["demo_attention_facts"])
    assert {
        "dagster_project.defs.assets.facts",
        "dagster_project.compute.attention_facts",
        "dagster_project.compute.metrics",
    } <= fact_modules
    assert not fact_modules & {
        "dagster_project.storage.partition_writes",
        "dagster_project.compute.models",
        "dagster_project.presentation.charts.common",
        "dagster_project.defs.tags",
        "dagster_project.defs.partitions",
    }
    # Plumbing to the others, but what encoder_model computes with (the model's device and dtype
    # included, and the random-init control's weights when the source asks for them).
    assert computing_modules(by_name["encoder_model"]) == {
        "dagster_project.defs.assets.models",
        "dagster_project.compute.models",
        "dagster_project.compute.devices",
        "dagster_project.compute.controls",
        "dagster_project.compute.random_init",
    }
    assert "dagster_project.compute.pascual.hta" in computing_modules(by_name["demo_hta_facts"])
    # Corpus assets reach every reader through the registry they import.
    corpus_modules = computing_modules(by_name["xnli_en_examples"])
    assert {
        "dagster_project.corpora",
        "dagster_project.corpora.text_pairs",
        "dagster_project.corpora.conllu_corpora",
        "dagster_project.corpora.framenet",
    } <= corpus_modules
    assert "dagster_project.corpora.base" not in corpus_modules

    specs = specs_by_key(all_assets)
    version = {key.to_user_string(): spec.code_version for key, spec in specs.items()}
    assert (
        version["xnli_en_attention_facts"] == version["demo_attention_facts"] == modules_version(sorted(fact_modules))
    )
    assert (
        len(
            {
                version["demo_attention_facts"],
                version["demo_hta_facts"],
                version["clark_fig2_special_tokens"],
                version["demo_examples"],
            }
        )
        == 4
    )
    assert version["warehouse_views"] == sql_code_version()  # an asset's own code version is kept
    assert corpus_files_key("xnli_en") in {dep.asset_key for dep in specs[AssetKey("xnli_en_examples")].deps}
    # Built in, no files: the demo corpus depends on the model only.
    assert {dep.asset_key for dep in specs[AssetKey("demo_examples")].deps} == {AssetKey("encoder_model")}
    again = specs_by_key(versioned_assets(all_assets))  # applying it twice changes nothing
    assert {key: (spec.code_version, spec.deps) for key, spec in again.items()} == {
        key: (spec.code_version, spec.deps) for key, spec in specs.items()
    }


def test_no_private_dagster_imports_in_the_schedule_and_versioning() -> None:
    for path in [
        Path(versioning.__file__),
        Path(versioning.__file__).with_name("schedules.py"),
        Path(versioning.__file__).with_name("staleness.py"),
        Path(__file__),
    ]:
        assert "dagster." + "_" not in path.read_text(), path
