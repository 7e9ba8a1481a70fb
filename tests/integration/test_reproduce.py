"""`attn-warehouse reproduce --quick` as a user types it, on a small random masked-LM BERT and a data folder
holding the corpora of one result per paper family (XNLI, WikiText, UD EWT, GLUE RTE): every result
view gets rows except those that need a corpus that is not there or a second model, and then the
fine-tuned checkpoint's attention on its task; a second call finds everything current."""

import os
import re
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
import torch
from transformers import BertConfig, BertForMaskedLM

from dagster_project.settings import PROJECT_ROOT
from dagster_project.storage.view_contracts import check_contracts
from tests.tiny_models import TINY_LAYERS, bert_tokenizer, save_model

pytestmark = pytest.mark.integration
PRESENT = ("xnli", "wikipedia", "ud_english_ewt", "glue/glue_style_tsv/RTE", "glue/hf_parquet/rte_train.parquet")
# Results no reproduction on PRESENT's corpora for one model can fill, and why (head matching compares
# the model with its RTE checkpoint).
EMPTY_RESULTS = {
    "clark_coreference_heads": "OntoGUM / GAP are not in the data folder",
    "kovaleva_framenet_heads": "FrameNet is not in the data folder",
    "kovaleva_framenet_head_ablation": "FrameNet is not in the data folder",
    "compare_weightings_faithfulness": "SST-2 is not in the data folder: its checkpoint's own run computes it",
    "compare_weightings_value_norms": "the norm weighting is beyond the papers (run config `weightings`)",
}


def _cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "dagster_project.cli", *args],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


@pytest.fixture(scope="module")
def small_mlm_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer masked-LM BERT with random weights whose d_head is MiniLM's (32), so XNLI keeps the
    examples of up to d_head pieces that Pascual's analyses take."""
    tokenizer = bert_tokenizer()
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=64,
        num_hidden_layers=TINY_LAYERS,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=160,
    )
    return save_model(tmp_path_factory.mktemp("small-mlm"), BertForMaskedLM(config), tokenizer)


def test_reproduce_quick_fills_every_result_it_can(shared_data_dir: Path, small_mlm_dir: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    for folder in PRESENT:
        (data / folder).parent.mkdir(parents=True, exist_ok=True)
        (data / folder).symlink_to(shared_data_dir / folder)
    env = {
        **os.environ,
        "ATTN_DATA_DIR": str(data),
        "ATTN_WAREHOUSE": str(tmp_path / "warehouse.duckdb"),
        "ATTN_CHARTS_DIR": str(tmp_path / "charts"),
        "DAGSTER_HOME": str(tmp_path / "dagster"),
        "ATTN_MODELS_CACHE": str(tmp_path / "models"),
        "ATTN_DEVICE": "cpu",
    }
    planned = _cli(["reproduce", str(small_mlm_dir), "--quick", "--dry-run"], env)
    assert planned.returncode == 0, planned.stderr
    assert "estimated:" in planned.stdout and re.search(r"\d+ steps to run", planned.stdout), planned.stdout
    # the checkpoints' own runs are counted too, and the total with them
    assert re.search(r"those runs: [\d.]+ (min|s); in all: [\d.]+ (min|s)", planned.stdout), planned.stdout
    assert not (tmp_path / "warehouse.duckdb").exists()  # a dry run writes nothing

    # The default estimator is tuned on MiniLM; on random weights it misses exact HTA, and the run
    # would fall back to exact after its check, so this model's HTA is exact from the start: 32
    # pieces x 64 dims is cheap. Eight examples per language are enough for every Pascual view.
    hta_settings = [
        f"--set=xnli_{language}_hta_facts.{key}={value}"
        for language in ("en", "de", "ar")
        for key, value in (("hta_method", "exact"), ("max_examples", 8))
    ]
    first = _cli(["reproduce", str(small_mlm_dir), "--quick", *hta_settings], env)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert "LOAD REPORT" not in first.stdout + first.stderr  # transformers' load reports go to the run log
    assert "head matching" in first.stdout and "not scheduled" in first.stdout

    conn = duckdb.connect(str(tmp_path / "warehouse.duckdb"), read_only=True)
    views = sorted(path.stem for path in (PROJECT_ROOT / "sql" / "results").glob("*.sql"))
    empty = {view for view in views if conn.execute(f"SELECT count(*) FROM {view}").fetchone()[0] == 0}
    assert conn.execute("SELECT profile FROM stg_reproductions").fetchall() == [("quick",)]
    assert conn.execute("SELECT count(*) FROM examples WHERE corpus = 'xnli_en'").fetchone()[0] == 200
    # The RTE checkpoint's attention facts, on RTE: Kovaleva's fine-tuned claims are judged, not missing.
    assert "attention of " in first.stdout and "--rte, fine-tuned from" in first.stdout
    fine_tuned = "SELECT DISTINCT corpus FROM kovaleva_feature_attention WHERE role = 'fine-tuned'"
    assert conn.execute(fine_tuned).fetchall() == [("glue_rte",)]
    # Judged, and judged by its precondition: a small random-weight model's quick RTE fine-tune does not
    # beat RTE's majority class, so the claim is not comparable and says which fine-tune fell short.
    verdict = "SELECT verdict, reason FROM reproduction_scorecard WHERE claim = 'kovaleva_fig6_cls_early_sep_late'"
    ((judged, reason),) = conn.execute(verdict).fetchall()
    assert judged == "not comparable", reason
    assert reason.startswith("fewer than two tasks whose fine-tune learned the task: rte: fine-tuned accuracy"), reason
    assert check_contracts(conn) == {}  # every view with rows keeps its grain and ranges (sql/results/<view>.yaml)
    conn.close()
    assert empty == set(EMPTY_RESULTS), sorted(empty ^ set(EMPTY_RESULTS))
    report = (tmp_path / "charts" / "report" / "clark.html").read_text()
    assert "Quick reproduction:" in report

    # Started again with the same --set: the configured HTA steps ran with those values and are current.
    second = _cli(["reproduce", str(small_mlm_dir), "--quick", "--dry-run", *hta_settings], env)
    assert second.returncode == 0, second.stderr[-3000:]
    to_run, current = map(int, re.search(r"(\d+) steps to run, (\d+) current", second.stdout).groups())
    assert to_run == 1 and current > 50, second.stdout  # only the report would be written again
