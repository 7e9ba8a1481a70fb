"""Helpers for tests that materialize assets in process: the run's resources on a folder, and a
materialization of assets for one model's partition; the steps `attn-warehouse run --dry-run` plans; and a
toy SST-2 in a data directory."""

import re
from collections.abc import Sequence
from pathlib import Path

import polars as pl
from dagster import AssetKey, AssetsDefinition, AssetSelection, DagsterInstance, ExecuteInProcessResult, materialize
from dagster_duckdb import DuckDBResource

from dagster_project.defs.resources import ChartFolder, ComputeResource, DataDirectory


def run_resources(folder: Path, data_dir: Path | None = None) -> dict:
    """Dagster resources on `folder`/warehouse.duckdb and `folder`/charts, reading corpora from
    `data_dir` (default: an empty `folder`/no-data); passes compute where ATTN_DEVICE / ATTN_DTYPE say."""
    return {
        "warehouse": DuckDBResource(database=str(folder / "warehouse.duckdb")),
        "data_dir": DataDirectory(path=str(data_dir or folder / "no-data")),
        "chart_folder": ChartFolder(path=str(folder / "charts")),
        "compute": ComputeResource(),
    }


def materialize_model(
    assets: Sequence[AssetsDefinition | AssetKey],
    model_id: str,
    instance: DagsterInstance,
    resources: dict,
    run_config: dict | None = None,
) -> ExecuteInProcessResult:
    """`assets` (with every other asset of the project loadable) materialized for model `model_id`'s
    partition; asserts the run succeeded."""
    # Here, not at the top: conftest imports run_resources, and most tests never load the asset graph.
    from dagster_project.defs.assets import all_assets

    result = materialize(
        all_assets,
        selection=AssetSelection.assets(*assets),
        partition_key=model_id,
        instance=instance,
        resources=resources,
        run_config=run_config,
    )
    assert result.success
    return result


def planned_steps(output: str) -> list[str]:
    """The steps `attn-warehouse run --dry-run` printed it would run; their number is the one it printed."""
    would_run = re.search(r"^would run (\d+) steps: (.*)$", output, re.M)
    steps = would_run[2].split(", ")
    assert int(would_run[1]) == len(steps)
    return steps


def toy_sst2(data: Path) -> None:
    """SST-2's training and validation files, a few sentences each, where the data directory keeps them."""
    glue = data / "glue" / "hf_parquet"
    glue.mkdir(parents=True)
    words = ["good", "bad", "fine", "awful", "great", "dull"]
    for split, n in (("train", 16), ("validation", 6)):
        pl.DataFrame(
            {
                "sentence": [f"a {words[i % 6]} film with {words[(i * 5) % 6]} acting" for i in range(n)],
                "label": [i % 2 for i in range(n)],
                "idx": list(range(n)),
            }
        ).write_parquet(glue / f"sst2_{split}.parquet")
