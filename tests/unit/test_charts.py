"""Charts drawn from view rows."""

import polars as pl

from dagster_project.presentation.charts import clark_head_mds_chart


def test_chart_colors_heads_by_layer() -> None:
    rows = pl.DataFrame(
        {"model": ["m"] * 2, "layer": [1, 2], "head": [3, 1], "x": [0.0, 1.0], "y": [0.5, 0.0], "stress": [0.1, 0.1]}
    )
    spec = clark_head_mds_chart(rows, "m on wiki_segments").to_dict()
    assert spec["encoding"]["color"]["field"] == "layer"
    assert [row["layer_head"] for row in next(iter(spec["datasets"].values()))] == ["1-3", "2-1"]
