"""Drawing a model's charts as PNG (presentation/charts/common.py chart_png, which the chart assets and
the report call) against the baseline it replaced: the key from chart.to_json (indented JSON, encoded
in pure Python) and the drawing by chart.save. Both arms draw every chart of the registry that has rows
for the model, from the same rows, in this process, interleaved per chart so that a busy machine slows
both alike; chart_png's cache is emptied before each drawing. Each chart's two PNGs must be the same bytes.

Usage (any warehouse with a model's facts, e.g. `attn-warehouse reproduce --quick`'s):
  OMP_WAIT_POLICY=PASSIVE .venv/bin/python -m bench.bench_charts WAREHOUSE.duckdb [--model MODEL]
Target: the same bytes, in less time than the baseline.
"""

import argparse
import io
import time

import altair as alt
import duckdb

from dagster_project.presentation.chart_registry import CHARTS
from dagster_project.presentation.charts import common
from dagster_project.presentation.scorecard import scorecard_rows


def baseline_png(chart: alt.TopLevelMixin) -> bytes:
    """The replaced chart_png, uncached: its key, then Altair's save."""
    with alt.data_transformers.disable_max_rows():
        chart.to_json()
    buffer = io.BytesIO()
    chart.save(buffer, format="png", scale_factor=common.CHART_SCALE)
    return buffer.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("warehouse")
    parser.add_argument("--model", help="hub id, path or model_id (default: the first with a scorecard)")
    args = parser.parse_args(argv)
    conn = duckdb.connect(args.warehouse, read_only=True)
    model_id = scorecard_rows(conn, args.model)["model_id"][0]
    seconds = {"baseline": 0.0, "chart_png": 0.0}
    drawn = 0
    for spec in CHARTS:
        found = spec.rows(conn, model_id)
        if found is None:
            continue
        corpus, rows = found
        chart = spec.draw(rows, spec.title(rows, corpus))
        start = time.perf_counter()
        before = baseline_png(chart)
        seconds["baseline"] += time.perf_counter() - start
        common._rendered.clear()
        start = time.perf_counter()
        after = common.chart_png(chart)
        seconds["chart_png"] += time.perf_counter() - start
        if after != before:
            raise SystemExit(f"{spec.name}: chart_png's PNG differs from chart.save's")
        drawn += 1
    print(f"{model_id}: {drawn} charts, the same bytes in both arms")
    print(f"  baseline  {seconds['baseline']:.1f} s")
    print(f"  chart_png {seconds['chart_png']:.1f} s  ratio {seconds['chart_png'] / seconds['baseline']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
