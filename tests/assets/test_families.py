"""Every encoder family end to end through the assets: attention facts, the Clark analyses that
run the model (dependency relation hits, gradient importance, dependency probes) and Kovaleva's
fine-tuning, head ablation and base vs fine-tuned similarity, one in-process run per family on its
tiny random masked LM (tests/tiny_models.FAMILIES) and toy corpora. (Head MDS reads only the head
distances every fact pass writes: tests/assets/test_head_clustering.py.)"""

from pathlib import Path

import duckdb
import polars as pl
import pytest
import transformers
from dagster import DagsterInstance
from transformers.models.auto.modeling_auto import MODEL_FOR_MASKED_LM_MAPPING_NAMES

from dagster_project.defs.assets import (
    ablation_assets_by_task,
    corpus_assets_by_name,
    encoder_model,
    fact_assets_by_corpus,
    finetuned_assets_by_task,
    similarity_assets_by_task,
)
from dagster_project.defs.assets.clark.gradients import grad_importance
from dagster_project.defs.assets.clark.probes import dependency_probes
from dagster_project.defs.registration import register_model
from dagster_project.storage.views import apply_views
from tests.assets.test_probes import UD  # right-branching attaches 3 of its 5 scored words correctly
from tests.runs import materialize_model, run_resources
from tests.tiny_models import FAMILIES, TINY_HEADS, TINY_LAYERS, tiny_family

WIKI = " = Cats = \n The cat sat on the mat . \n It slept well . \n The dog went home . \n"
CORPORA_USED = ("wiki_segments", "ud_ewt_dev", "ud_ewt_test", "glue_rte_train", "glue_rte")
SEPARATORS = {"roberta": 3, "xlm-roberta": 3, "mpnet": 3}  # `</s></s>` between the segments; others 2


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A WikiText file, UD EWT dev/test and GLUE RTE train/validation, all tiny."""
    root = tmp_path_factory.mktemp("data")
    (root / "ud_english_ewt").mkdir()
    for split in ("dev", "test"):
        (root / "ud_english_ewt" / f"en_ewt-ud-{split}.conllu").write_text(UD, encoding="utf-8")
    (root / "wikipedia").mkdir()
    (root / "wikipedia" / "wikitext2_raw_wiki.test.raw").write_text(WIKI, encoding="utf-8")
    glue = root / "glue" / "hf_parquet"
    glue.mkdir(parents=True)
    words = ["good", "bad", "cat", "dog", "rain", "sun"]
    for split, n in (("train", 8), ("validation", 6)):
        pl.DataFrame(
            {
                "sentence1": [f"the {words[i % 6]} is here ." for i in range(n)],
                "sentence2": [f"a {words[(i * 5) % 6]} is there" for i in range(n)],
                "label": [i % 2 for i in range(n)],
                "idx": list(range(n)),
            }
        ).write_parquet(glue / f"rte_{split}.parquet")
    return root


def _masked_lm(name: str, folder: Path) -> Path:
    """The family's tiny model with its masked-LM head (the loss gradient importance takes)."""
    model_type = FAMILIES[name].config_class.model_type
    return tiny_family(name, folder, getattr(transformers, MODEL_FOR_MASKED_LM_MAPPING_NAMES[model_type]))


@pytest.fixture(scope="module")
def shared(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[DagsterInstance, dict]:
    """One instance and warehouse (views created once) for every family: rows are told apart by model_id."""
    resources = run_resources(tmp_path_factory.mktemp("warehouse"), data_dir)
    with resources["warehouse"].get_connection() as conn:
        apply_views(conn)
    return DagsterInstance.ephemeral(), resources


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_family_runs_every_analysis(name: str, shared: tuple[DagsterInstance, dict], tmp_path: Path):
    instance, resources = shared
    model_id = register_model(str(_masked_lm(name, tmp_path / name)), instance, resources["warehouse"]).model_id
    assets = [
        encoder_model,
        *(corpus_assets_by_name[corpus] for corpus in CORPORA_USED),
        fact_assets_by_corpus["glue_rte"],
        fact_assets_by_corpus["ud_ewt_test"],
        grad_importance,
        dependency_probes,
        finetuned_assets_by_task["rte"],
        ablation_assets_by_task["rte"],
        similarity_assets_by_task["rte"],
    ]
    run_config = {
        "ops": {
            "grad_importance": {"config": {"max_examples": 2}},  # on wiki_segments
            "dependency_probes": {"config": {"epochs": 1}},
            "finetuned_rte": {"config": {"batch_size": 4, "max_steps": 1, "learning_rate": 1e-3}},
            "rte_ablation": {"config": {"batch_tokens": 4096}},
        }
    }
    result = materialize_model(assets, model_id, instance, resources, run_config)
    failed = [check.check_name for check in result.get_asset_check_evaluations() if not check.passed]
    assert failed == []

    heads = TINY_LAYERS * TINY_HEADS
    with duckdb.connect(resources["warehouse"].database, read_only=True) as conn:
        one = lambda sql, *params: conn.execute(sql, list(params)).fetchone()  # noqa: E731
        # facts: one [CLS] and the family's separators per RTE pair, a summary per head whose rows sum to 1
        separators = SEPARATORS.get(name, 2)
        assert one(
            "SELECT bool_and(n_cls = 1 AND n_sep = ?) FROM (SELECT count(*) FILTER (token_class = 'cls') AS n_cls, "
            "count(*) FILTER (token_class = 'sep') AS n_sep FROM tokens WHERE model_id = ? AND corpus = 'glue_rte' "
            "GROUP BY example_id)",
            separators,
            model_id,
        ) == (True,)
        n_rte = one("SELECT count(*) FROM examples WHERE model_id = ? AND corpus = 'glue_rte'", model_id)[0]
        assert one(
            "SELECT count(*), max(row_sum_error) < 1e-5 FROM head_summaries WHERE model_id = ? AND corpus = 'glue_rte'",
            model_id,
        ) == (n_rte * heads, True)
        # Clark Table 1's relation hits over the family's word alignment: each of the 6 UD words points at
        # another word of its sentence, and in "Cats sleep" each of the two words at the other
        hits = conn.execute(
            "SELECT example_id, word_index, target_word, w.n FROM stg_relation_hits JOIN (SELECT example_id, "
            "count(*) AS n FROM words WHERE model_id = ? AND corpus = 'ud_ewt_test' GROUP BY ALL) AS w "
            "USING (example_id) WHERE model_id = ? AND corpus = 'ud_ewt_test'",
            [model_id, model_id],
        ).pl()
        assert hits.height == 6 * heads and (hits["target_word"] != hits["word_index"]).all()
        assert ((hits["target_word"] >= 0) & (hits["target_word"] < hits["n"])).all()
        pair = hits.filter(pl.col("n") == 2)
        assert pair.height == 2 * heads and (pair["target_word"] == 1 - pair["word_index"]).all()
        # Clark: gradients of the masked-LM loss, probes over the family's word alignment
        assert one(
            "SELECT count(DISTINCT target_type), min(grad_magnitude) > 0 FROM clark_grad_importance WHERE model_id = ?",
            model_id,
        ) == (3, True)
        assert one(
            "SELECT uas, n_words FROM clark_probe_uas WHERE model_id = ? AND probe = 'right_branching'", model_id
        ) == (
            pytest.approx(200 / 3),
            3,
        )
        assert one("SELECT count(*) FROM clark_probe_uas WHERE model_id = ?", model_id) == (5,)
        # Kovaleva: three settings on the 6 validation pairs, every head and layer disabled, maps compared
        scores = conn.execute(
            "SELECT setting, n_examples, tuned_model_id FROM kovaleva_task_scores WHERE model_id = ?", [model_id]
        ).pl()
        assert sorted(scores["setting"]) == ["pretrained", "pretrained_finetuned", "random_init_finetuned"]
        assert scores["n_examples"].unique().to_list() == [6]
        tuned_id = scores.filter(pl.col("setting") == "pretrained_finetuned")["tuned_model_id"][0]
        assert one("SELECT count(*) FROM kovaleva_head_ablation WHERE tuned_model_id = ?", tuned_id) == (heads,)
        assert one("SELECT count(*) FROM kovaleva_layer_ablation WHERE tuned_model_id = ?", tuned_id) == (TINY_LAYERS,)
        assert one(
            "SELECT count(*), min(cosine) > 0, max(cosine) <= 1 + 1e-6 FROM finetune_cosines WHERE model_id = ?",
            model_id,
        ) == (
            n_rte * heads,
            True,
            True,
        )
