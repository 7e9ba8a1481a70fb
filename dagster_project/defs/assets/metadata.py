"""Metadata shared by the assets: row counts and a readable preview of what was written."""

from collections.abc import Callable

import polars as pl
from dagster import AssetExecutionContext, MetadataValue


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


def progress_logger(
    context: AssetExecutionContext, label: str, every_seconds: float
) -> Callable[[int, int, float], None]:
    """A `progress(done, total, seconds)` callback logging at most every `every_seconds`, and at the end."""
    last = [0.0]

    def report(done: int, total: int, seconds: float) -> None:
        if seconds - last[0] >= every_seconds or done == total:
            last[0] = seconds
            context.log.info(f"{label}: {done}/{total} examples in {seconds:.0f} s ({done / seconds:.1f} examples/s)")

    return report
