"""`attn-warehouse` commands: `sql`, `export`, the check for corpora, quoted commands, and `run` (quiet output
with a log file, one-line errors, run config from --config and --set) on the tiny model and the demo corpus."""

import logging
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import duckdb
import pytest
from dagster import build_init_logger_context

from dagster_project.cli import UsageError, main
from dagster_project.cli.console import PROGRESS_MESSAGE, file_logger, logs_in_file
from dagster_project.cli.run_in_process import run_config_from
from dagster_project.compute.models import ModelSpec
from dagster_project.defs.assets.writing import progress_logger
from dagster_project.storage.model_rows import upsert_model
from tests.runs import planned_steps
from tests.servers import stretched

SPEC = ModelSpec("org--tiny", "org/tiny", "/models/tiny", "abc", "bert", 2, 2, True)


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


def test_a_runs_log_handlers_come_off_and_close_when_it_ends(tmp_path: Path):
    """transformers' records and the run's events go to the log file while the run executes; after it,
    a process that runs again (a notebook, these tests) holds no handler on that file and no open file."""
    path = tmp_path / "run.log"
    library = logging.getLogger("transformers")
    before = list(library.handlers)
    with logs_in_file(path, verbose=False):
        run_log = file_logger(path, verbose=False).logger_fn(build_init_logger_context())
        logging.getLogger("transformers.modeling_utils").warning("LOAD REPORT")
        run_log.info("STEP_START")
        opened = [handler for handler in [*library.handlers, *run_log.handlers] if handler not in before]
    assert len(opened) == 2
    assert library.handlers == before and run_log.handlers == []
    assert all(handler.stream is None for handler in opened)  # closed
    assert "LOAD REPORT" in path.read_text() and "STEP_START" in path.read_text()


def test_run_without_any_corpus_says_where_it_looked(env: Path, tiny_model_dir: Path, capsys: pytest.CaptureFixture):
    assert main(["run", str(tiny_model_dir), "--corpus", "ud_ewt_dev"]) == 2
    err = capsys.readouterr().err
    data_dir = env.parent / "data"
    assert (
        f"error: no corpus found: none of ud_ewt_dev has its files in the data directory {data_dir}; get it with "
        "`attn-warehouse data fetch ud_ewt_dev`, point ATTN_DATA_DIR to the folder holding the corpora" in err
    )
    assert "--corpus demo" in err
    assert not env.exists()  # nothing registered


def test_a_dry_run_prints_the_plan_and_writes_nothing(env: Path, tiny_model_dir: Path, capsys: pytest.CaptureFixture):
    run = ["run", str(tiny_model_dir), "--corpus", "demo", "--corpus", "xnli_de", "--analysis", "attention"]
    assert main([*run, "--dry-run"]) == 0
    out = capsys.readouterr().out
    steps = planned_steps(out)
    assert {"encoder_model", "warehouse_views", "demo_examples", "demo_attention_facts", "paper_report"} <= set(steps)
    missing = env.parent / "data" / "xnli" / "xnli_validation_de.tsv"
    skipped = f"skipping corpus xnli_de: {missing} not found; get it with `attn-warehouse data fetch xnli_de`"
    assert f"{skipped} (or set ATTN_DATA_DIR)\n" in out
    assert not env.exists()  # nothing registered, nothing written


def test_add_model_quotes_the_command_it_suggests(env: Path, tiny_model_dir: Path, capsys: pytest.CaptureFixture):
    model = env.parent / "m; rm -rf x"
    model.mkdir()
    for file in tiny_model_dir.iterdir():
        (model / file.name).write_bytes(file.read_bytes())
    assert main(["add-model", str(model)]) == 0
    command = re.search(r"`(attn-warehouse run .*)`", capsys.readouterr().out)[1]
    assert command == f"attn-warehouse run '{model}'"
    assert shlex.split(command) == ["attn-warehouse", "run", str(model)]


def _cli(*args: str) -> subprocess.CompletedProcess:
    """`attn-warehouse ARGS` in a new process, with this test's environment."""
    return subprocess.run(
        [sys.executable, "-m", "dagster_project.cli", *args], capture_output=True, text=True, timeout=600
    )


@pytest.mark.slow
def test_run_is_quiet_takes_run_config_and_logs_every_event_to_a_file(env: Path, tiny_model_dir: Path):
    config = env.parent / "run.yaml"
    config.write_text("ops:\n  demo_examples:\n    config:\n      size: 7\n      seed: 3\n")
    done = _cli(
        "run", str(tiny_model_dir), "--corpus", "demo", "--analysis", "attention",
        "--config", str(config), "--set", "demo_examples.size=5",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = done.stdout
    # One line per asset: position, start time, name, seconds, rows per table.
    examples = re.search(
        r"^\[ ?\d+/(\d+)\] \d\d:\d\d:\d\d demo_examples +\d+\.\d s  ([\d,]+) rows \(examples 5, ", out, re.M
    )
    assert examples, out
    lines = [line for line in out.splitlines() if line.startswith("[")]
    assert len(lines) == int(examples[1]) and lines[-1].split()[2] == "paper_report"
    assert re.search(
        r"^\[.*\] .* clark_fig2_special_tokens +\d+\.\d s  chart from [\d,]+ rows of clark_special", out, re.M
    )
    assert "DEBUG" not in out + done.stderr and "STEP_START" not in out + done.stderr
    log = Path(re.search(r"^log: (\S+)", out, re.M)[1])
    assert log.parent == env.parent / "dagster" / "run_logs" and "STEP_START" in log.read_text()
    # --set wins over --config, the file's other field stays.
    with duckdb.connect(str(env), read_only=True) as conn:
        assert conn.execute("SELECT count(*), min(seed), max(seed) FROM examples WHERE corpus = 'demo'").fetchone() == (
            5,
            3,
            3,
        )


@pytest.mark.slow
def test_a_failing_asset_prints_its_one_line_cause_and_the_log(env: Path, tiny_model_dir: Path):
    bad = env.parent / "data" / "ud_english_ewt" / "en_ewt-ud-test.conllu"
    bad.parent.mkdir(parents=True)
    bad.write_text(
        "# sent_id = s1\n1\tCats\tcat\tNOUN\tNNS\t_\t2\tnsubj\t_\t_\n2\tsleep\tsleep\tVERB\tVBP\t_\tx\troot\t_\t_\n\n"
    )
    done = _cli("run", str(tiny_model_dir), "--corpus", "ud_ewt_test", "--analysis", "attention")
    assert done.returncode == 1
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert errors == [f"error: ud_ewt_test_examples: {bad}, line 3: head 'x' is not an integer word id"]
    log = re.search(r"\(the traceback is in (\S+)\)", done.stderr)[1]
    assert "Traceback" in Path(log).read_text() and "Traceback" not in done.stderr


def test_run_config_from_a_file_and_assignments():
    assert run_config_from(None, ["finetuned_mrpc.max_steps=40", "finetuned_mrpc.settings=[pretrained]"]) == {
        "ops": {"finetuned_mrpc": {"config": {"max_steps": 40, "settings": ["pretrained"]}}}
    }
    with pytest.raises(UsageError, match=r"--set 'max_steps=40': expected ASSET.FIELD=VALUE"):
        run_config_from(None, ["max_steps=40"])


def test_bad_run_config_is_refused_before_anything_runs(env: Path, tiny_model_dir: Path, capsys: pytest.CaptureFixture):
    config = env.parent / "bad.yaml"
    config.write_text("ops:\n  demo_examples: {config: {size: 5}\n")
    assert main(["run", str(tiny_model_dir), "--corpus", "demo", "--config", str(config)]) == 2
    assert re.search(rf"error: {re.escape(str(config))}, line \d: not valid YAML", capsys.readouterr().err)
    assert main(["run", str(tiny_model_dir), "--corpus", "demo", "--set", "demo_hta_facts.max_examples=2"]) == 2
    err = capsys.readouterr().err
    assert "run config for 'demo_hta_facts', which this run does not materialize" in err
    assert "--analysis=hta" in err
    assert main(["run", str(tiny_model_dir), "--corpus", "demo", "--set", "demo_exampels.size=2"]) == 2
    assert "no such asset (did you mean demo_examples?)" in capsys.readouterr().err
    assert not env.exists()  # nothing registered


def test_export_writes_a_view(env: Path, capsys: pytest.CaptureFixture):
    with duckdb.connect(str(env)) as conn:
        upsert_model(conn, SPEC)
    out = env.parent / "models.csv"
    assert main(["export", "models", "--format", "csv", "--out", str(out), "--model", "org--tiny"]) == 0
    assert "models.csv: 1 rows of models for model org--tiny" in capsys.readouterr().out
    assert out.read_text().splitlines()[1].startswith("org--tiny,org/tiny,")
    assert main(["export", "modles"]) == 2
    assert "no view or table 'modles' (did you mean models?)" in capsys.readouterr().err


@pytest.mark.parametrize("under", ["a file", "below a file"])
def test_export_all_into_a_file_is_one_line(env: Path, under: str, capsys: pytest.CaptureFixture) -> None:
    with duckdb.connect(str(env)) as conn:
        upsert_model(conn, SPEC)
    (env.parent / "taken").write_text("mine\n")
    out = env.parent / "taken" if under == "a file" else env.parent / "taken" / "sub"
    assert main(["export", "--all", "--out", str(out)]) == 2
    assert capsys.readouterr().err == (
        f"error: cannot export into the folder {out}: it is a file; choose another --out\n"
    )
    assert (env.parent / "taken").read_text() == "mine\n"


def test_export_all_removes_the_old_manifest_first_and_writes_the_new_one_last(
    env: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dagster_project.cli import export
    from dagster_project.storage.views import apply_views

    with duckdb.connect(str(env)) as conn:
        apply_views(conn)
        upsert_model(conn, SPEC)
    folder = env.parent / "results"
    assert main(["export", "--all", "--out", str(folder)]) == 0
    capsys.readouterr()
    assert (folder / "manifest.json").is_file()

    def full_disk(conn, folder: Path, file_format: str, model_id: str | None) -> None:
        (folder / "clark_entropy.parquet").write_bytes(b"half")
        raise duckdb.IOException("IO Error: Could not write file: No space left on device")

    monkeypatch.setattr(export, "write_results", full_disk)
    assert main(["export", "--all", "--out", str(folder)]) == 2
    assert capsys.readouterr().err == "error: IO Error: Could not write file: No space left on device\n"
    assert not (folder / "manifest.json").exists()  # the folder says it is not whole


def test_the_console_reads_the_progress_lines_of_the_passes():
    messages: list[str] = []
    progress_logger(SimpleNamespace(log=SimpleNamespace(info=messages.append)), "demo pass")(30, 120, 12.0)
    found = PROGRESS_MESSAGE.search(messages[0])
    assert (found["done"], found["total"], found["seconds"]) == ("30", "120", "12")


def test_all_corpora_leave_out_the_tasks_outside_the_papers_unless_named() -> None:
    from dagster_project.cli.run_in_process import chosen_corpora
    from dagster_project.corpora import CORPORA, DEFAULT_CORPORA

    assert CORPORA["glue_cola"].outside_papers and CORPORA["glue_wnli_train"].outside_papers
    assert not CORPORA["glue_rte"].outside_papers
    every = chosen_corpora(["all"])
    assert "glue_rte" in every and "ontogum" in every
    assert not {"glue_cola", "glue_cola_train", "glue_wnli", "glue_wnli_train"} & set(every)
    assert chosen_corpora(["all", "glue_cola"])[-1] == "glue_cola"
    assert chosen_corpora(None) == list(DEFAULT_CORPORA) and chosen_corpora(["glue_cola"]) == ["glue_cola"]


def test_reproduce_with_a_control_plans_each_model_then_its_control(
    env: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """`--control random-init` follows the model with random-init:MODEL, planned alike; a dry run registers
    nothing (its random weights are saved in the models cache, as a hub model is downloaded there)."""
    from dagster_project.compute.models import model_key

    monkeypatch.setenv("ATTN_MODELS_CACHE", str(env.parent / "models"))
    for name in ("en_ewt-ud-dev.conllu", "en_ewt-ud-test.conllu"):  # present: a dry run reads no corpus
        (env.parent / "data" / "ud_english_ewt").mkdir(exist_ok=True)
        (env.parent / "data" / "ud_english_ewt" / name).touch()
    assert main(["reproduce", "--control", "random-init", str(tiny_model_dir), "--quick", "--dry-run"]) == 0
    plans = re.findall(r"^(\S+) -> partition (\S+): \d+ steps to run", capsys.readouterr().out, re.MULTILINE)
    key = model_key(str(tiny_model_dir))
    assert plans == [(str(tiny_model_dir), key), (f"random-init:{tiny_model_dir}", f"{key}--random-init")]
    assert not env.exists()


def test_an_unknown_control_or_a_bad_control_source_is_one_line(
    env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.setenv("ATTN_MODELS_CACHE", str(env.parent / "models"))
    assert main(["reproduce", "--control", "shuffled", "org/name", "--dry-run"]) == 2
    assert capsys.readouterr().err == "error: --control shuffled: no such control; the control kinds are random-init\n"
    assert main(["add-model", "random-init:org/name@seed=two"]) == 2
    assert capsys.readouterr().err == (
        "error: 'random-init:org/name@seed=two': the seed must be a whole number >= 0 at the end, as in "
        "'random-init:<hub id or path>' (seed 0) or 'random-init:<hub id or path>@seed=<n>'\n"
    )
    assert not env.exists() and not (env.parent / "models").exists()


def test_run_on_a_file_that_is_not_a_duckdb_file_is_one_line(
    env: Path, tiny_model_dir: Path, capsys: pytest.CaptureFixture
) -> None:
    env.write_text("my notes, not a warehouse\n")
    assert main(["run", str(tiny_model_dir), "--corpus", "demo", "--analysis", "attention"]) == 2
    assert capsys.readouterr().err == (
        f"error: the warehouse {env} is not a DuckDB database file: point ATTN_WAREHOUSE at the warehouse "
        "(or at a new file name, for a new one), or move that file away\n"
    )
    assert env.read_text() == "my notes, not a warehouse\n"


def test_run_beside_a_warehouse_in_a_read_only_folder_is_one_line(
    env: Path,
    tiny_model_dir: Path,
    make_read_only: Callable[[Path], None],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
) -> None:
    folder = env.parent / "shared"
    folder.mkdir()
    warehouse = folder / "warehouse.duckdb"
    with duckdb.connect(str(warehouse)) as conn:
        upsert_model(conn, SPEC)
    make_read_only(folder)
    monkeypatch.setenv("ATTN_WAREHOUSE", str(warehouse))
    monkeypatch.delenv("DAGSTER_HOME")  # beside the warehouse, by default
    args = ["run", str(tiny_model_dir), "--corpus", "demo", "--analysis", "attention"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: cannot set up the Dagster instance folder {folder / '.dagster'} (") and err.endswith(
        "): set DAGSTER_HOME to a folder this user can write (it defaults to .dagster beside ATTN_WAREHOUSE)\n"
    )
    monkeypatch.setenv("DAGSTER_HOME", str(env.parent / "dagster"))
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: cannot write in the folder {folder} of the warehouse {warehouse} (")
    assert err.count("\n") == 1 and err.endswith(
        "where DuckDB keeps its write-ahead log: make the folder writable, or point ATTN_WAREHOUSE at a folder "
        "this user can write\n"
    )
    # reading needs no write there
    assert main(["sql", "SELECT model_id FROM models"]) == 0
    assert "org--tiny" in capsys.readouterr().out


def test_a_steps_error_names_the_step_once() -> None:
    from dagster_project.cli.run_in_process import failure_line

    size = ValueError("demo_examples: run config size must be at least 1, got -5")
    assert failure_line("demo_examples", size) == "error: demo_examples: run config size must be at least 1, got -5"
    assert failure_line("demo_attention_facts", OSError("the disk is full")) == (
        "error: demo_attention_facts: the disk is full"
    )
    assert failure_line(None, RuntimeError("no step")) == "error: no step"


@pytest.mark.parametrize("file_format", ["csv", "parquet"])
def test_an_export_to_a_full_disk_leaves_no_file(
    env: Path, tiny_disk: Path, file_format: str, capsys: pytest.CaptureFixture
) -> None:
    with duckdb.connect(str(env)) as conn:  # 200,000 random doubles: about 4 MB of CSV, 1.6 MB of Parquet
        conn.execute("CREATE TABLE numbers AS SELECT range AS n, random() AS x FROM range(200000)")
    out = tiny_disk / f"numbers.{file_format}"
    assert main(["export", "numbers", "--format", file_format, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "No space left on device" in err and err.count("\n") == 1
    assert list(tiny_disk.iterdir()) == []  # neither the file, empty or part-written, nor its temporary


@pytest.mark.slow
def test_sigterm_during_a_run_ends_it_in_one_line_within_its_grace(env: Path, tiny_model_dir: Path) -> None:
    """SIGTERM while a step runs: Dagster raises DagsterExecutionInterruptedError in it (a traceback of
    180 lines before); the run ends with one line, exit status 130, well within the 5 s grace."""
    process = subprocess.Popen(
        [sys.executable, "-m", "dagster_project.cli", "run", str(tiny_model_dir), "--corpus", "demo", "--hta",
         "--set", "demo_hta_facts.hta_method=exact"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        log = next(Path(line.split()[1]) for line in process.stdout if line.startswith("log: "))
        started = 'STEP_START - Started execution of step "demo_hta_facts"'
        deadline = time.monotonic() + stretched(300)
        while started not in (log.read_text() if log.exists() else "") and process.poll() is None:
            assert time.monotonic() < deadline, "the run never started demo_hta_facts"
            time.sleep(0.1)
        signalled = time.monotonic()
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=stretched(60))
        seconds = time.monotonic() - signalled
    finally:
        process.kill()
    assert process.returncode == 130, err
    assert "Traceback" not in err and seconds < stretched(5)
    lines = err.splitlines()
    assert lines[0] == "interrupted: stopping (forced in 5 s, or at a second Ctrl-C)"
    assert re.fullmatch(
        r"interrupted: run \S+ stopped in demo_hta_facts \((canceled|failure)\); an unfinished write was rolled back: "
        rf"re-run to finish what it left \(the log: {re.escape(str(log))}\)",
        lines[-1],
    ), lines
    assert "Traceback" in log.read_text()  # the traceback is in the log, for who wants it


def test_run_runs_the_checkpoints_it_fine_tunes_and_then_the_report(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run that fine-tunes on SST-2: the base model's steps without the report, then the checkpoint's own
    run (where the weighting faithfulness is computed), then the report alone."""
    from dagster import AssetKey

    from dagster_project.cli import run as run_verb
    from dagster_project.defs.run_planning import PreparedRun

    steps = [AssetKey("finetuned_sst2"), AssetKey("sst2_ablation"), AssetKey("paper_report")]
    prepared = PreparedRun("m", "m", ["glue_sst2"], ["finetuning"], steps, [], [])
    done: list[object] = []
    monkeypatch.setattr(run_verb, "plan_run", lambda *args, **options: prepared)
    monkeypatch.setattr(run_verb, "execute_run", lambda run, config, verbose: done.append(run.step_names) or 0)
    monkeypatch.setattr(
        run_verb, "run_checkpoints", lambda model_id, tasks, config_for, verbose: done.append((model_id, tasks)) or 0
    )
    monkeypatch.setattr(run_verb, "print_outputs", lambda model_id: None)
    assert run_verb.run("m", ["glue_sst2"], ["finetuning"]) == 0
    assert done == [["finetuned_sst2", "sst2_ablation"], ("m", ["sst2"]), ["paper_report"]]
    # without a fine-tuning the report stays in the one run
    prepared.keys = [AssetKey("demo_examples"), AssetKey("paper_report")]
    done.clear()
    assert run_verb.run("m", ["demo"], ["attention"]) == 0
    assert done == [["demo_examples", "paper_report"]]
