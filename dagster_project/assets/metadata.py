"""Metadata shared by the assets: row counts and a readable preview of what was written."""

import polars as pl
from dagster import MetadataValue


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
