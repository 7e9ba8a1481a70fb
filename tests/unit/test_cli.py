"""`attn-warehouse` commands without a run: `sql`, the check for corpora, and quoted commands."""

import re
import shlex
from pathlib import Path

import duckdb
import pytest

from dagster_project.cli import main
from dagster_project.compute.models import ModelSpec
from dagster_project.storage.warehouse import upsert_model

SPEC = ModelSpec("org--tiny", "org/tiny", "/models/tiny", "abc", "bert", 2, 2, True)


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every location in tmp_path; the data directory exists and is empty. Returns the warehouse path."""
    (tmp_path / "data").mkdir()
    monkeypatch.setenv("ATTN_WAREHOUSE", str(tmp_path / "warehouse.duckdb"))
    monkeypatch.setenv("ATTN_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("ATTN_CHARTS_DIR", str(tmp_path / "charts"))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))
    return tmp_path / "warehouse.duckdb"


def test_sql_prints_the_result_and_lets_go_of_the_file(env: Path, capsys: pytest.CaptureFixture):
    assert main(["sql", "SELECT 1"]) == 2
    assert f"no warehouse at {env}" in capsys.readouterr().err
    with duckdb.connect(str(env)) as conn:
        upsert_model(conn, SPEC)
    assert main(["sql", "SELECT model_id, source, n_layers FROM models"]) == 0
    out = capsys.readouterr().out
    assert "org--tiny" in out and "org/tiny" in out and "n_layers" in out
    # closed: a read-write connection of this process would be refused beside an open read-only one
    with duckdb.connect(str(env)) as conn:
        conn.execute("UPDATE models SET n_layers = 3")
    assert main(["sql", "SELECT * FROM range(10)", "--max-rows", "4"]) == 0
    assert "(first 4 rows; --max-rows to see more)" in capsys.readouterr().out


def test_sql_opens_the_warehouse_read_only(env: Path, capsys: pytest.CaptureFixture):
    with duckdb.connect(str(env)) as conn:
        upsert_model(conn, SPEC)
    assert main(["sql", "DELETE FROM models"]) == 2
    assert "read-only" in capsys.readouterr().err
    assert main(["sql", "SELECT count(*) AS n FROM models"]) == 0
    assert re.search(r"│ 1\s+│", capsys.readouterr().out)


def test_run_without_any_corpus_says_where_it_looked(env: Path, tiny_model_dir: Path, capsys: pytest.CaptureFixture):
    assert main(["run", str(tiny_model_dir), "--corpus", "ud_ewt_dev"]) == 2
    err = capsys.readouterr().err
    data_dir = env.parent / "data"
    assert f"error: no corpus found: none of ud_ewt_dev has its files in the data directory {data_dir}." in err
    assert "Point ATTN_DATA_DIR to the folder holding the corpora" in err
    assert "--corpus demo" in err
    assert not env.exists()  # nothing registered


def test_add_model_quotes_the_command_it_suggests(env: Path, tiny_model_dir: Path, capsys: pytest.CaptureFixture):
    model = env.parent / "m; rm -rf x"
    model.mkdir()
    for file in tiny_model_dir.iterdir():
        (model / file.name).write_bytes(file.read_bytes())
    assert main(["add-model", str(model)]) == 0
    command = re.search(r"`(attn-warehouse run .*)`", capsys.readouterr().out)[1]
    assert command == f"attn-warehouse run '{model}'"
    assert shlex.split(command) == ["attn-warehouse", "run", str(model)]
