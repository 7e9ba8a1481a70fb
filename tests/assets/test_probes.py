"""Dependency-probes asset (Clark §5, Table 3) on a tiny UD corpus."""

from pathlib import Path

import duckdb
import pytest
from dagster import DagsterInstance, ExecuteInProcessResult, materialize
from dagster_duckdb import DuckDBResource

from dagster_project.defs.assets import all_assets, corpus_assets_by_name, encoder_model
from dagster_project.defs.assets.clark.probes import dependency_probes
from dagster_project.defs.registration import register_model
from dagster_project.defs.resources import ChartFolder, ComputeResource, DataDirectory
from dagster_project.storage.views import apply_views

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


def _materialize_probes(
    model_dir: Path, tmp_path: Path, config: dict
) -> tuple[ExecuteInProcessResult, duckdb.DuckDBPyConnection]:
    """UD EWT dev and test both the tiny UD above, the model registered, dependency_probes
    materialized with `config`; the run's result and the warehouse with its views."""
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
    spec = register_model(str(model_dir), instance, resources["warehouse"])
    result = materialize(
        all_assets,
        selection=[
            encoder_model,
            corpus_assets_by_name["ud_ewt_dev"],
            corpus_assets_by_name["ud_ewt_test"],
            dependency_probes,
        ],
        partition_key=spec.model_id,
        instance=instance,
        resources=resources,
        run_config={"ops": {"dependency_probes": {"config": config}}},
    )
    assert result.success
    conn = duckdb.connect(str(tmp_path / "warehouse.duckdb"))
    apply_views(conn)
    return result, conn


def test_asset_writes_every_probe_and_the_view(tiny_model_dir: Path, tmp_path: Path):
    result, conn = _materialize_probes(tiny_model_dir, tmp_path, {"epochs": 3})
    # honest labels: the model's own input embeddings are not GloVe (before: shown as "Attn + GloVe")
    labels = dict(conn.execute("SELECT probe, label FROM clark_probe_uas").fetchall())
    assert labels == {
        "right_branching": "Right-branching",
        "attn": "Attn",
        "attn_words": "Attn + input embeddings",
        "distance_words": "Distances + input embeddings",
        "random_init_attn_words": "Random Init Attn + input embeddings",
    }
    assert set(conn.execute("SELECT train_corpus FROM clark_probe_uas").fetchall()) == {("ud_ewt_dev",)}
    rows = {
        row[0]: row[1:] for row in conn.execute("SELECT probe, uas, n_words, paper_uas FROM clark_probe_uas").fetchall()
    }
    assert set(rows) == {"right_branching", "attn", "attn_words", "distance_words", "random_init_attn_words"}
    # I -> don't (miss), don't -> know (hit), Cats -> sleep (hit): 2 of 3. The roots (know, sleep)
    # have no head word to find and '.' is punctuation: left out of every row (before: 3 of 5).
    assert rows["right_branching"] == (pytest.approx(200 / 3), 3, 26.0)
    assert all(n_words == 3 for _, n_words, _ in rows.values())
    # the paper's attention-and-words probe (only W and U), recorded on the rows and in the metadata
    assert set(conn.execute("SELECT word_probe_bias FROM clark_probe_uas").fetchall()) == {(False,)}
    metadata = result.asset_materializations_for_node("dependency_probes")[0].metadata
    assert metadata["word_probe_bias"].value is False


def test_word_probe_bias_is_an_option_recorded_with_the_rows(tiny_model_dir: Path, tmp_path: Path):
    result, conn = _materialize_probes(tiny_model_dir, tmp_path, {"epochs": 1, "word_probe_bias": True})
    assert set(conn.execute("SELECT word_probe_bias FROM clark_probe_uas").fetchall()) == {(True,)}
    metadata = result.asset_materializations_for_node("dependency_probes")[0].metadata
    assert metadata["word_probe_bias"].value is True


def test_probes_train_on_a_users_conllu_file_with_a_users_word_vectors(tiny_model_dir: Path, tmp_path: Path):
    """Run config: train_file (any CoNLL-U file instead of UD EWT dev, e.g. PTB WSJ converted)
    and word_vectors_file (GloVe-style text), recorded in train_corpus / word_vectors / label."""
    (tmp_path / "wsj.conllu").write_text(UD + UD.replace("s1", "s3").replace("s2", "s4"), encoding="utf-8")
    (tmp_path / "glove.txt").write_text("i 1 0\ncats 0 1\nsleep 1 1\nknow 0.5 0.5\n", encoding="utf-8")
    config = {
        "epochs": 2,
        "train_file": str(tmp_path / "wsj.conllu"),
        "word_vectors_file": str(tmp_path / "glove.txt"),
    }
    result, conn = _materialize_probes(tiny_model_dir, tmp_path, config)
    metadata = result.asset_materializations_for_node("dependency_probes")[0].metadata
    # test words: I don't know . Cats sleep: 4 of 6 have a vector (lowercased), "don't" and "." not
    assert metadata["word_vector_coverage_ud_ewt_test"].value == pytest.approx(4 / 6, abs=1e-4)
    rows = conn.execute(
        "SELECT probe, label, train_corpus, n_train_sentences FROM clark_probe_uas ORDER BY probe"
    ).fetchall()
    assert rows == [
        ("attn", "Attn", "file:wsj.conllu", 4),
        ("attn_words", "Attn + glove.txt", "file:wsj.conllu", 4),
        ("distance_words", "Distances + glove.txt", "file:wsj.conllu", 4),
        ("random_init_attn_words", "Random Init Attn + glove.txt", "file:wsj.conllu", 4),
        ("right_branching", "Right-branching", "file:wsj.conllu", 4),
    ]
