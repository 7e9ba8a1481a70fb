"""What every writing asset shares: the decorator of an asset computed per model partition
(model_partition_asset), progress in the log, check specs and results from the pure checks, and
the write-and-report step (replace the partition's rows, return row counts,
a preview and the check results)."""

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import polars as pl
from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetExecutionContext,
    AssetsDefinition,
    MaterializeResult,
    MetadataValue,
    asset,
)
from dagster_duckdb import DuckDBResource

from dagster_project.compute.checks import CheckOutcome
from dagster_project.defs.partitions import model_partitions
from dagster_project.defs.pools import GPU_PASS_OP_TAGS, GPU_PASS_POOL, WRITER_POOL
from dagster_project.defs.provenance import BATCH_ID, CORPUS
from dagster_project.storage.partition_writes import new_batch_id, replace_partition

PROGRESS_INTERVAL_SECONDS = 10.0


def table_preview(frame: pl.DataFrame, rows: int = 5) -> MetadataValue:
    with pl.Config(
        tbl_formatting="MARKDOWN",
        tbl_hide_column_data_types=True,
        tbl_hide_dataframe_shape=True,
        tbl_cols=-1,
        tbl_width_chars=400,
        fmt_str_lengths=40,
    ):
        return MetadataValue.md(str(frame.head(rows)))


def progress_logger(context: AssetExecutionContext, label: str) -> Callable[[int, int, float], None]:
    """A `progress(done, total, seconds)` callback logging at most every PROGRESS_INTERVAL_SECONDS, and at the end."""
    last = [0.0]

    def report(done: int, total: int, seconds: float) -> None:
        if seconds - last[0] >= PROGRESS_INTERVAL_SECONDS or done == total:
            last[0] = seconds
            context.log.info(f"{label}: {done}/{total} examples in {seconds:.0f} s ({done / seconds:.1f} examples/s)")

    return report


def check_specs(asset_name: str, checks: Mapping[str, str]) -> list[AssetCheckSpec]:
    """Blocking specs for the named checks (name -> description)."""
    return [
        AssetCheckSpec(name, asset=asset_name, description=description, blocking=True)
        for name, description in checks.items()
    ]


def check_result(outcome: CheckOutcome) -> AssetCheckResult:
    return AssetCheckResult(
        check_name=outcome.name, passed=outcome.passed, severity=AssetCheckSeverity.ERROR, metadata=outcome.metadata
    )


def write_partition(
    context: AssetExecutionContext,
    warehouse: DuckDBResource,
    tables: dict[str, pl.DataFrame],
    corpus: str,
    outcomes: Sequence[CheckOutcome | AssetCheckResult] = (),
    metadata: Mapping[str, Any] | None = None,
    preview: pl.DataFrame | None = None,
    examples: Mapping[str, str] | None = None,
) -> MaterializeResult:
    """Replace the (partition's model, corpus) rows of `tables` in one transaction and report
    rows written per table, `metadata`, a preview and the check outcomes. The batch id and corpus
    are recorded so a later run can see whether the warehouse still holds this write. `examples`
    (corpus -> batch id, from corpora.examples_read): the write commits only while they are current."""
    batch_id = new_batch_id()
    with warehouse.get_connection() as conn:
        written = replace_partition(conn, tables, context.partition_key, corpus, batch_id, examples)
    return MaterializeResult(
        metadata={
            BATCH_ID: batch_id,
            CORPUS: corpus,
            **{f"{table}_rows": rows for table, rows in written.items()},
            **(metadata or {}),
            **({"preview": table_preview(preview)} if preview is not None else {}),
        },
        check_results=[
            outcome if isinstance(outcome, AssetCheckResult) else check_result(outcome) for outcome in outcomes
        ],
    )


def model_partition_asset(
    name: str,
    *,
    description: str,
    deps: Sequence[Any],
    group_name: str,
    tags: Mapping[str, str],
    checks: Mapping[str, str] | None = None,
    model_pass: bool = True,
) -> Callable[[Callable[..., Any]], AssetsDefinition]:
    """The decorator of an asset computed per model partition: partitioned by model, with blocking
    `checks` (name -> description). A `model_pass` runs the model on the device, so it waits in
    the GPU pool and its step asks for one device; otherwise it only writes, in the writer pool."""
    return asset(
        name=name,
        description=description,
        partitions_def=model_partitions,
        deps=list(deps),
        group_name=group_name,
        tags=dict(tags),
        pool=GPU_PASS_POOL if model_pass else WRITER_POOL,
        **({"op_tags": GPU_PASS_OP_TAGS} if model_pass else {}),
        check_specs=check_specs(name, checks or {}),
    )
