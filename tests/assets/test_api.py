"""The Python API (dagster_project/api.py) and `attn-warehouse export --all`, on a warehouse of the
tiny BERT's demo corpus: the examples of docs/howto/python.md run as written, a result is its
view's rows, example_maps are the model's own attention, and the export holds every results view."""

import json
import re
import subprocess
import sys
from contextlib import redirect_stdout
from io import StringIO
from pathlib import Path

import duckdb
import numpy as np
import polars as pl
import pytest
import torch
from dagster import DagsterInstance, materialize
from polars.testing import assert_frame_equal
from transformers import BertModel

from dagster_project import example_maps, open_warehouse
from dagster_project.cli import main
from dagster_project.compute.models import DEFAULT_MODEL
from dagster_project.defs.assets import corpus_assets_by_name, encoder_model, fact_assets_by_corpus, warehouse_views
from dagster_project.defs.registration import register_model
from dagster_project.settings import PROJECT_ROOT
from dagster_project.storage.sql_files import view_definitions
from tests.runs import materialize_model, run_resources
from tests.tiny_models import TINY_HEADS, TINY_LAYERS

PAGE = PROJECT_ROOT / "docs" / "howto" / "python.md"
RESULTS_VIEWS = {view.name for view in view_definitions() if view.layer == "results"}


@pytest.fixture(scope="module")
def demo_warehouse(tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path) -> tuple[Path, str]:
    """A warehouse file with the tiny BERT's demo examples and attention facts; its model_id."""
    folder = tmp_path_factory.mktemp("api-warehouse")
    resources = run_resources(folder)
    instance = DagsterInstance.ephemeral()
    spec = register_model(str(tiny_model_dir), instance, resources["warehouse"])
    assert materialize([warehouse_views], instance=instance, resources=resources).success
    assets = [encoder_model, corpus_assets_by_name["demo"], fact_assets_by_corpus["demo"]]
    materialize_model(assets, spec.model_id, instance, resources)
    return folder / "warehouse.duckdb", spec.model_id


@pytest.fixture
def env(demo_warehouse: tuple[Path, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The demo warehouse configured as the DuckDB file backend; the working directory and every
    other location in tmp_path. Returns the warehouse path."""
    monkeypatch.setenv("ATTN_WAREHOUSE", str(demo_warehouse[0]))
    monkeypatch.delenv("ATTN_WAREHOUSE_BACKEND", raising=False)
    monkeypatch.setenv("ATTN_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))
    monkeypatch.chdir(tmp_path)
    return demo_warehouse[0]


def test_the_python_page_runs_as_written(env: Path, tiny_model_dir: Path) -> None:
    """Every ```python block of the page, in order in one namespace, with the tiny BERT for the
    default model and the page's export done first."""
    blocks = re.findall(r"^```python\n(.*?)^```", PAGE.read_text(encoding="utf-8"), flags=re.DOTALL | re.MULTILINE)
    assert len(blocks) >= 5
    assert main(["export", "--all", "--out", "results"]) == 0
    namespace: dict = {}
    printed = StringIO()
    with redirect_stdout(printed):
        for block in blocks:
            exec(compile(block.replace(DEFAULT_MODEL, str(tiny_model_dir)), str(PAGE), "exec"), namespace)
    assert "Warehouse(DuckDB file" in printed.getvalue()
    assert "names several views: pascual_center_of_mass, pascual_language_center_of_mass" in printed.getvalue()
    assert namespace["special"].height == TINY_LAYERS * TINY_HEADS
    assert namespace["entropy"]["layer"].to_list() == list(range(1, TINY_LAYERS + 1))
    maps = namespace["maps"]
    assert set(maps["layer"]) == {2} and set(maps["head"]) == {1}
    assert namespace["matrix"].shape[0] ** 2 == maps.height
    assert set(namespace["tables"]) == RESULTS_VIEWS
    # every connection the page opened is closed: a writer can open the file
    duckdb.connect(str(env)).close()


def test_a_result_is_its_views_rows(env: Path) -> None:
    with open_warehouse() as wh:
        assert set(wh.views()) == RESULTS_VIEWS
        for paper, name, view in [
            ("clark", "Fig. 2", "clark_special_tokens"),
            ("Clark et al. 2019", "figure 4", "clark_entropy"),
            ("clark", "clark_relative_position", "clark_relative_position"),
            ("KOVALEVA", "fig2", "kovaleva_pattern_shares"),
            ("pascual", "Figure 5", "pascual_center_of_mass"),
            ("compare", "Attention entropy", "clark_entropy"),
        ]:
            rows = wh.result(paper, name)
            assert rows.height > 0
            assert_frame_equal(rows, wh.sql(f"SELECT * FROM {view}"), check_row_order=False)
        assert_frame_equal(
            wh.result("pascual", "fig. 4", view="pascual_center_of_mass"),
            wh.sql("SELECT * FROM pascual_center_of_mass"),
            check_row_order=False,
        )
        with pytest.raises(ValueError, match=r"Clark et al. has no result 'fig. 9': its results are Fig. 1, .*Table 3"):
            wh.result("clark", "fig. 9")
        with pytest.raises(ValueError, match=r"several views: clark_head_mds, clark_head_distances; choose one"):
            wh.result("clark", "fig 6")
        with pytest.raises(ValueError, match=r"drawn from clark_head_mds, clark_head_distances, not clark_entropy"):
            wh.result("clark", "fig 6", view="clark_entropy")
        with pytest.raises(ValueError, match=r"no paper 'devlin'"):
            wh.result("devlin", "table 1")
        assert wh.sql("SELECT count(*) AS n FROM examples WHERE corpus = $corpus", {"corpus": "demo"})["n"][0] == 24
    with pytest.raises(FileNotFoundError, match="no warehouse at"):
        open_warehouse(env.parent / "none.duckdb")


def _warehouse_tokens(path: Path, model_id: str, example_id: int) -> pl.DataFrame:
    with open_warehouse(path) as wh:
        return wh.sql(
            "SELECT position, token_id, token, segment FROM stg_tokens "
            "WHERE model_id = ? AND corpus = 'demo' AND example_id = ? ORDER BY position",
            [model_id, example_id],
        )


def test_example_maps_are_the_models_own_attention(
    env: Path, demo_warehouse: tuple[Path, str], tiny_model_dir: Path, tiny_mlm_dir: Path
) -> None:
    model_id = demo_warehouse[1]
    example_id = 5
    maps = example_maps(model_id, "demo", example_id)
    tokens = _warehouse_tokens(env, model_id, example_id)
    n = tokens.height
    assert maps.columns == ["layer", "head", "query", "key", "query_token", "key_token", "attention"]
    assert maps.height == TINY_LAYERS * TINY_HEADS * n * n
    sums = maps.group_by("layer", "head", "query").agg(pl.col("attention").sum())["attention"]
    assert np.allclose(sums.to_numpy(), 1.0, atol=1e-5)
    assert maps.filter(key=0)["key_token"].unique().to_list() == ["[CLS]"]
    assert maps.filter(layer=1, head=1, key=3)["query_token"].to_list() == tokens["token"].to_list()

    # The model's own output_attentions on the same pieces, (layers, heads, n, n).
    model = BertModel.from_pretrained(tiny_model_dir, attn_implementation="eager").eval()
    with torch.no_grad():
        own = model(
            input_ids=torch.tensor([tokens["token_id"].to_list()]),
            token_type_ids=torch.tensor([tokens["segment"].to_list()]),
            output_attentions=True,
        ).attentions
    expected = torch.stack([layer[0] for layer in own]).numpy()
    got = maps["attention"].to_numpy().reshape(TINY_LAYERS, TINY_HEADS, n, n)
    assert np.abs(got - expected).max() < 1e-6

    # One head, by source instead of model_id; through an open warehouse alike.
    head = example_maps(str(tiny_model_dir), "demo", example_id, layer=2, head=3)
    assert_frame_equal(head, maps.filter(layer=2, head=3))
    with open_warehouse() as wh:
        assert_frame_equal(wh.example_maps(model_id, "demo", example_id, layer=2, head=3), head)
    with pytest.raises(ValueError, match=r"layer 3 is not one of the model's layers 1..2"):
        example_maps(model_id, "demo", example_id, layer=3)

    # A model that never ran on demo: the corpus is encoded with the warehouse's settings, and the
    # example is the same pieces.
    other = example_maps(str(tiny_mlm_dir), "demo", example_id, layer=1, head=1)
    assert other.filter(key=0)["query_token"].to_list() == tokens["token"].to_list()
    with pytest.raises(ValueError, match=r"demo has no example 100000 for this model"):
        example_maps(str(tiny_mlm_dir), "demo", 100_000)


@pytest.mark.parametrize("file_format", ["parquet", "csv"])
def test_export_all_writes_every_results_view_and_a_manifest(
    env: Path, demo_warehouse: tuple[Path, str], file_format: str, capsys: pytest.CaptureFixture
) -> None:
    model_id = demo_warehouse[1]
    out = Path.cwd() / "export"
    assert main(["export", "--all", "--format", file_format, "--out", str(out)]) == 0
    assert f"{out}: {len(RESULTS_VIEWS)} results views" in capsys.readouterr().out
    manifest = json.loads((out / "manifest.json").read_text())
    assert {entry["view"] for entry in manifest["files"]} == RESULTS_VIEWS
    assert manifest["code"]["package"] == "attention-warehouse" and manifest["code"]["sql_version"]
    [run] = manifest["runs"]
    assert (run["model_id"], run["corpus"], run["examples"], run["max_len"]) == (model_id, "demo", 24, 128)
    read = pl.read_parquet if file_format == "parquet" else pl.read_csv
    with duckdb.connect(str(env), read_only=True) as conn:
        for entry in manifest["files"]:
            assert entry["file"] == f"{entry['view']}.{file_format}"
            rows = conn.execute(f"SELECT count(*) FROM {entry['view']}").fetchone()[0]
            assert entry["rows"] == rows == read(out / entry["file"]).height
            # every claim missing: no corpus
            if entry["view"] in ("reproduction_scorecard", "scorecard_matrix", "claim_judgments"):
                assert entry["models"] == ([model_id] if rows else []) and entry["corpora"] == []
                continue
            assert entry["models"] == ([model_id] if rows else []) and entry["corpora"] == (["demo"] if rows else [])
    assert sum(entry["rows"] > 0 for entry in manifest["files"]) >= 8


def test_export_takes_one_view_or_all(env: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["export"]) == 2
    assert main(["export", "clark_entropy", "--all"]) == 2
    assert "name one VIEW to export, or --all" in capsys.readouterr().err


def test_importing_the_package_stays_cheap() -> None:
    """The API loads on first use of its names only, after the package set OMP_WAIT_POLICY."""
    code = (
        "import os, sys; os.environ.pop('OMP_WAIT_POLICY', None); import dagster_project; "
        "assert os.environ['OMP_WAIT_POLICY'] == 'PASSIVE'; "
        "assert not {'dagster_project.api', 'torch', 'duckdb'} & set(sys.modules); "
        "from dagster_project import open_warehouse, Warehouse; assert 'dagster_project.api' in sys.modules; "
        "assert open_warehouse.__module__ == 'dagster_project.api'; "
        "from dagster_project import settings; "
        "assert not hasattr(dagster_project, 'nothing')"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
