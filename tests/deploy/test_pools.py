"""Pools follow the warehouse backend (defs/pools.py): with `duckdb` every writing asset, the
passes that run a model included, is in warehouse_writer; with `ducklake` no asset is, and the
passes that run a model are in the gpu pool. The ducklake definitions are loaded in a fresh
process, as a code server started with that backend would load them."""

import json
import os
import subprocess
import sys

from dagster import AssetsDefinition

from dagster_project.defs.assets import all_assets
from dagster_project.defs.pools import GPU, K8S_CONFIG_TAG, WAREHOUSE_WRITER
from dagster_project.settings import PROJECT_ROOT
from dagster_project.storage.backend import BACKEND_SETTING, CATALOG_SETTING, DATA_PATH_SETTING
from tests.deploy.passes import GPU_PASSES

POOLS_BY_ASSET = """
import json
from dagster import AssetsDefinition
from dagster_project.defs.assets import all_assets
print(json.dumps({
    asset.key.to_user_string(): asset.op.pool
    for asset in all_assets
    if isinstance(asset, AssetsDefinition) and asset.is_executable
}))
"""


def pools_by_asset() -> dict[str, str | None]:
    return {
        asset.key.to_user_string(): asset.op.pool
        for asset in all_assets
        if isinstance(asset, AssetsDefinition) and asset.is_executable
    }


def test_the_gpu_passes_are_the_assets_that_take_the_compute_device() -> None:
    """A new pass given the `compute` resource (compute/devices.py) without the GPU placement fails here."""
    on_device = {
        asset.key
        for asset in all_assets
        if isinstance(asset, AssetsDefinition) and asset.is_executable and "compute" in asset.required_resource_keys
    }
    assert on_device == {asset.key for asset in GPU_PASSES}
    assert all(asset.op.tags.get(K8S_CONFIG_TAG) for asset in GPU_PASSES)


def test_pools_follow_the_backend(tmp_path) -> None:
    assert os.environ.get(BACKEND_SETTING, "duckdb") == "duckdb"
    gpu_passes = {asset.key.to_user_string() for asset in GPU_PASSES}
    on_duckdb = pools_by_asset()
    writers = {key for key, pool in on_duckdb.items() if pool == WAREHOUSE_WRITER}
    assert set(on_duckdb.values()) == {WAREHOUSE_WRITER, None}
    assert gpu_passes < writers
    env = {
        **os.environ,
        BACKEND_SETTING: "ducklake",
        CATALOG_SETTING: str(tmp_path / "catalog.ducklake"),
        DATA_PATH_SETTING: str(tmp_path / "lake"),
    }
    loaded = subprocess.run(
        [sys.executable, "-c", POOLS_BY_ASSET], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, check=True
    )
    on_ducklake = json.loads(loaded.stdout.strip().splitlines()[-1])
    assert on_ducklake.keys() == on_duckdb.keys()
    assert {key for key, pool in on_ducklake.items() if pool == GPU} == gpu_passes
    assert {key for key, pool in on_ducklake.items() if pool is not None} == gpu_passes
