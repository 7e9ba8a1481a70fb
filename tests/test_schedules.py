import hashlib
from pathlib import Path

import pytest
from dagster import AssetKey, DagsterInstance, asset, build_schedule_context, instance_for_test, materialize
from dagster._core.definitions.assets.graph.asset_graph import AssetGraph
from dagster_duckdb import DuckDBResource

from dagster_project.defs.assets import all_assets
from dagster_project.compute.models import model_key
from dagster_project.defs.partitions import model_partitions
from dagster_project.defs.registration import register_model
from dagster_project.defs.resources import ChartFolder, DataDirectory
from dagster_project.defs.schedules import build_refresh_schedule, record_corpus_files, refresh_plan
from dagster_project.defs.versioning import corpus_files_assets, corpus_files_key, versioned_assets
from dagster_project.storage.warehouse import sql_code_version


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


def test_a_new_code_version_makes_only_that_asset_stale(
    instance: DagsterInstance, tmp_path: Path, tiny_model_dir: Path
) -> None:
    resources = {
        "warehouse": DuckDBResource(database=str(tmp_path / "warehouse.duckdb")),
        "data_dir": DataDirectory(path=str(tmp_path / "no-data")),
        "chart_folder": ChartFolder(path=str(tmp_path / "charts")),
    }
    assets = all_assets
    tiny = register_model(str(tiny_model_dir), instance, resources["warehouse"]).model_id
    assert tiny == model_key(str(tiny_model_dir))
    materialize(assets, selection=["warehouse_views"], instance=instance, resources=resources)
    chosen = ["encoder_model", "demo_examples", "demo_attention_facts", "clark_fig2_special_tokens"]
    materialize(assets, selection=chosen, partition_key=tiny, instance=instance, resources=resources)
    assert refresh_plan(instance, AssetGraph.from_assets(assets)).selections == {}

    edited = with_code_version(assets, "demo_attention_facts", "edited")
    plan = refresh_plan(instance, AssetGraph.from_assets(edited))
    assert plan.stale == {tiny: [AssetKey("demo_attention_facts")]}
    # The chart drawn from those facts is re-run with them; the model and corpus are not.
    assert plan.selections == {tiny: [AssetKey("clark_fig2_special_tokens"), AssetKey("demo_attention_facts")]}

    # A stale view file goes first, alone: the per-model runs wait for the next tick.
    views_edited = with_code_version(edited, "warehouse_views", "new-sql")
    assert refresh_plan(instance, AssetGraph.from_assets(views_edited)).selections == {
        None: [AssetKey("warehouse_views")]
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


def test_changed_corpus_files_make_their_corpus_stale(instance: DagsterInstance, tmp_path: Path) -> None:
    wiki = tmp_path / "data" / "wikipedia" / "wikitext2_raw_wiki.test.raw"
    wiki.parent.mkdir(parents=True)
    wiki.write_text(" = Section = \n first paragraph \n")
    resources = {"data_dir": DataDirectory(path=str(tmp_path / "data"))}
    assets = [*corpus_files_assets, wiki_examples, wiki_facts, demo_examples]
    graph = AssetGraph.from_assets(assets)
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
    assert refresh_plan(instance, graph).selections == {}
    assert refresh(build_schedule_context(instance=instance, resources=resources)).skip_message == "nothing is stale"

    wiki.write_text(" = Section = \n first paragraph, edited \n")
    requests = refresh(build_schedule_context(instance=instance, resources=resources))
    assert [(request.partition_key, request.asset_selection) for request in requests] == [
        ("a", [AssetKey("wiki_segments_attention_facts"), AssetKey("wiki_segments_examples")])
    ]
    assert refresh_plan(instance, graph).stale == {"a": [AssetKey("wiki_segments_examples")]}

    materialize(
        assets, selection=requests[0].asset_selection, partition_key="a", instance=instance, resources=resources
    )
    assert refresh_plan(instance, graph).selections == {}


def test_code_versions_hash_the_modules_each_asset_computes_with() -> None:
    from dagster_project import facts, metrics
    from dagster_project.defs.versioning import computing_modules, modules_version

    expected = hashlib.sha256(Path(facts.__file__).read_bytes() + Path(metrics.__file__).read_bytes()).hexdigest()[:16]
    assert (
        modules_version(
            [
                "dagster_project.compute.metrics",
                "dagster_project.compute.attention_facts",
                "dagster_project.compute.metrics",
            ]
        )
        == expected
    )

    by_name = {asset.key.path[-1]: asset for asset in all_assets if asset.is_executable and len(asset.keys) == 1}
    fact_modules = computing_modules(by_name["demo_attention_facts"])
    assert {
        "dagster_project.defs.assets.facts",
        "dagster_project.compute.attention_facts",
        "dagster_project.compute.metrics",
        "dagster_project.compute.checks",
    } <= fact_modules
    assert not fact_modules & {
        "dagster_project.storage.warehouse",
        "dagster_project.compute.models",
        "dagster_project.presentation.charts",
    }
    assert computing_modules(by_name["encoder_model"]) == {
        "dagster_project.defs.assets.models",
        "dagster_project.compute.models",
    }
    assert "dagster_project.compute.hta" in computing_modules(by_name["demo_hta_facts"])

    graph = AssetGraph.from_assets(all_assets)
    version = {key.to_user_string(): graph.get(key).code_version for key in graph.materializable_asset_keys}
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
    assert corpus_files_key("xnli_en") in graph.get(AssetKey("xnli_en_examples")).parent_keys
    assert graph.get(AssetKey("demo_examples")).parent_keys == {AssetKey("encoder_model")}  # built in: no files
    again = AssetGraph.from_assets(versioned_assets(all_assets))  # applying it twice changes nothing
    assert {
        key: (again.get(key).code_version, again.get(key).parent_keys) for key in again.materializable_asset_keys
    } == {key: (graph.get(key).code_version, graph.get(key).parent_keys) for key in graph.materializable_asset_keys}
