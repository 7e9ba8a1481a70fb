"""The warehouse is the truth, not the run history (defs/provenance.py): what the history calls
current is re-run where the warehouse file does not hold it: a new file beside an old history
(ATTN_WAREHOUSE moved), a deleted file, a file restored from an older copy."""

import shutil
from pathlib import Path

import duckdb
import pytest
from dagster import AssetKey, DagsterInstance, instance_for_test
from dagster_duckdb import DuckDBResource

from dagster_project.defs.assets import all_assets
from dagster_project.defs.provenance import WarehouseEvidence
from dagster_project.defs.registration import register_model
from dagster_project.defs.staleness import up_to_date_keys
from dagster_project.storage.backend import WarehouseConfig
from tests.runs import materialize_model, run_resources

VIEWS = AssetKey("warehouse_views")
FACTS = AssetKey("demo_attention_facts")
EXAMPLES = AssetKey("demo_examples")
MODEL = AssetKey("encoder_model")
KEYS = [VIEWS, MODEL, EXAMPLES, FACTS]


@pytest.fixture
def instance() -> DagsterInstance:
    with instance_for_test() as test_instance:
        yield test_instance


@pytest.fixture
def history(instance: DagsterInstance, tmp_path: Path, tiny_model_dir: Path) -> tuple[str, dict]:
    """The tiny model's views, examples and facts materialized into tmp_path/warehouse.duckdb."""
    resources = run_resources(tmp_path)
    model_id = register_model(str(tiny_model_dir), instance, resources["warehouse"]).model_id
    materialize_model([VIEWS, MODEL, EXAMPLES, FACTS], model_id, instance, resources)
    return model_id, resources


def evidence(path: Path) -> WarehouseEvidence:
    return WarehouseEvidence.read(DuckDBResource(database=str(path)), WarehouseConfig("duckdb", str(path)))


def current(instance: DagsterInstance, model_id: str, found: WarehouseEvidence) -> set[AssetKey]:
    return up_to_date_keys(instance, all_assets, KEYS, model_id, found)


def test_the_warehouse_the_history_describes_is_current(
    instance: DagsterInstance, tmp_path: Path, history: tuple[str, dict]
) -> None:
    model_id, _ = history
    found = evidence(tmp_path / "warehouse.duckdb")
    assert current(instance, model_id, found) == set(KEYS)
    assert found.note() is None


def test_a_new_file_beside_the_old_history_is_rebuilt(
    instance: DagsterInstance, tmp_path: Path, history: tuple[str, dict], tiny_model_dir: Path
) -> None:
    model_id, _ = history
    moved = tmp_path / "moved"
    moved.mkdir()
    found = evidence(moved / "warehouse.duckdb")
    assert current(instance, model_id, found) == {MODEL}  # it writes no batch: its record is taken as it is
    assert found.note() == (
        f"the run history has 3 asset(s) that DuckDB file {moved / 'warehouse.duckdb'} does not hold (a new, moved "
        "or older warehouse): re-running warehouse_views, demo_examples, demo_attention_facts"
    )
    # What is re-run fills the new file, and it is then current.
    resources = run_resources(moved)
    register_model(str(tiny_model_dir), instance, resources["warehouse"])
    materialize_model([VIEWS, EXAMPLES, FACTS], model_id, instance, resources)
    assert current(instance, model_id, evidence(moved / "warehouse.duckdb")) == set(KEYS)
    with duckdb.connect(str(moved / "warehouse.duckdb"), read_only=True) as conn:
        assert conn.execute("SELECT count(*) FROM stg_head_summaries WHERE corpus = 'demo'").fetchone()[0] > 0


def test_a_deleted_file_is_rebuilt(instance: DagsterInstance, tmp_path: Path, history: tuple[str, dict]) -> None:
    model_id, _ = history
    (tmp_path / "warehouse.duckdb").unlink()
    assert current(instance, model_id, evidence(tmp_path / "warehouse.duckdb")) == {MODEL}


def test_a_file_restored_from_an_older_copy_is_rebuilt(
    instance: DagsterInstance, tmp_path: Path, history: tuple[str, dict]
) -> None:
    model_id, resources = history
    path = tmp_path / "warehouse.duckdb"
    shutil.copy(path, tmp_path / "older.duckdb")
    materialize_model([FACTS], model_id, instance, resources)  # a newer batch of facts
    shutil.copy(tmp_path / "older.duckdb", path)
    assert current(instance, model_id, evidence(path)) == {VIEWS, MODEL, EXAMPLES}

    # A copy whose views other SQL made: the views are not current either.
    with duckdb.connect(str(path)) as conn:
        conn.execute("CREATE OR REPLACE VIEW stg_models AS SELECT * FROM models WHERE false")
    assert current(instance, model_id, evidence(path)) == {MODEL, EXAMPLES}
