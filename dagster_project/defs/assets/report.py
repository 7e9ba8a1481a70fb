"""The static HTML report of every model's charts, refreshed after the charts."""

from pathlib import Path

from dagster import AssetExecutionContext, MaterializeResult, MetadataValue, asset
from dagster_duckdb import DuckDBResource

from dagster_project.defs.assets.charts import chart_assets
from dagster_project.defs.resources import ChartFolder

# Module imports: the report's modules import the chart registry, hence this package.
from dagster_project.presentation import report as report_pages
from dagster_project.presentation import report_data


@asset(deps=chart_assets, group_name="charts")
def paper_report(
    context: AssetExecutionContext, warehouse: DuckDBResource, chart_folder: ChartFolder
) -> MaterializeResult:
    """`report/` beside the chart folders: index.html and one page per paper with every chart
    of that paper for every registered model, a model selector (opening on the model with the
    most results there) and headline numbers per layer; heads/<model>.html with the example maps
    of the heads the results name. Opens offline (charts are embedded PNGs)."""
    with warehouse.get_connection() as conn:
        data = report_data.read_report_data(conn)
    pages = report_pages.write_report(data, Path(chart_folder.path).expanduser().resolve() / "report")
    drawn = sum(isinstance(found, tuple) for found in data.chart_rows.values())
    context.log.info(f"Wrote {len(pages)} pages to {pages[0].parent}")
    return MaterializeResult(
        metadata={
            "index": MetadataValue.path(str(pages[0])),
            "pages": MetadataValue.md("\n".join(f"- `{page.name}`" for page in pages)),
            "models": data.models.height,
            "charts_drawn": drawn,
            "charts_missing": len(data.chart_rows) - drawn,
            "named_heads": sum(heads.select("layer", "head").n_unique() for heads in data.heads.values()),
        }
    )
