"""Fine-tuning mechanics on tiny random models, GLUE metrics by hand, and MiniLM on a slice of RTE."""

import contextlib
import json
import math
import platform
from dataclasses import replace
from pathlib import Path

import polars as pl
import pytest
import torch

from dagster_project.compute.backoff import PassOutOfMemory
from dagster_project.compute.kovaleva import finetuning
from dagster_project.compute.kovaleva.ablation import ablation_settings, settings_logits, use_ablation_attention
from dagster_project.compute.kovaleva.finetuning import (
    Recipe,
    build_classifier,
    fine_tune,
    glue_metrics,
    predict_logits,
    recipe_record,
    save_checkpoint,
    training_precision,
)
from dagster_project.compute.kovaleva.task_data import (
    TaskData,
    encode_task,
    length_sorted_batches,
    pad_inputs,
    task_head,
)
from dagster_project.compute.kovaleva.training_state import TrainingCheckpoints
from tests.out_of_memory import batch_rows, out_of_memory_above


def _toy_task(n: int) -> TaskData:
    """[CLS] w w [SEP] with w = 'good' (label 1) or 'bad' (label 0): learnable from one token."""
    words = torch.tensor([2204, 2919])  # bert-base-uncased ids of 'good', 'bad'
    labels = torch.arange(n) % 2
    ids = [torch.tensor([101, words[1 - label], words[1 - label], 102]) for label in labels.tolist()]
    return TaskData(list(range(n)), ids, [torch.zeros(4, dtype=torch.long)] * n, 1.0 - labels.float())


def test_glue_metrics_by_hand():
    labels = torch.tensor([1.0, 1.0, 0.0, 0.0, 1.0])
    logits = torch.tensor([[0.0, 1.0], [1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])  # predicts 1 0 0 1 1
    # tp 2, fp 1, fn 1: precision = recall = 2/3; accuracy 3/5
    assert glue_metrics("mrpc", logits, labels) == pytest.approx({"accuracy": 0.6, "f1": 2 / 3})
    # Matthews: (tp*tn - fp*fn) / sqrt((tp+fp)(tp+fn)(tn+fp)(tn+fn)) = (2 - 1) / sqrt(3*3*2*2) = 1/6
    assert glue_metrics("cola", logits, labels) == pytest.approx({"accuracy": 0.6, "matthews": 1 / 6})
    assert glue_metrics("rte", logits, labels) == pytest.approx({"accuracy": 0.6})
    scores = glue_metrics("stsb", torch.tensor([[1.0], [2.0], [3.0], [5.0]]), torch.tensor([1.0, 2.0, 3.0, 4.0]))
    # predictions 1 2 3 5 vs 1 2 3 4: centred (-1.75 -0.75 0.25 2.25) and (-1.5 -0.5 0.5 1.5)
    assert scores["pearson"] == pytest.approx(6.5 / math.sqrt(8.75 * 5.0))
    assert scores["spearman"] == pytest.approx(1.0)
    assert math.isnan(glue_metrics("stsb", torch.ones(3, 1), torch.tensor([1.0, 2.0, 3.0]))["pearson"])


def test_task_heads():
    assert task_head("stsb") == (1, "regression")
    assert task_head("mrpc") == (2, "single_label_classification")
    with pytest.raises(ValueError, match="unknown GLUE task 'mnli'"):
        task_head("mnli")


def test_encode_task_truncates_overlong_pairs_like_glue_and_pads(tokenizer):
    """GLUE scoring keeps every validation pair, cut to max_len longest segment first (before:
    the warehouse's examples, from which pairs over max_len are dropped: RTE 244 of 277)."""
    texts = pl.DataFrame(
        {
            "example_id": [7, 3, 5],
            "text_a": ["good dog", "a b c d e f g h", "cat"],
            "text_b": ["bad cat", "x y", "dog"],
            "label": [1.0, 0.0, 1.0],
        }
    )
    encoded = encode_task(texts, tokenizer, 8, "truncate", "glue_rte")
    data = encoded.data
    assert encoded.n_overlong == 1 and data.example_ids == [3, 5, 7]
    pieces = [tokenizer.convert_ids_to_tokens(ids.tolist()) for ids in data.token_ids]
    # 13 pieces -> 8: the longer segment (8 letters) loses 5, the pair keeps both [SEP]s
    assert pieces == [
        ["[CLS]", "a", "b", "c", "[SEP]", "x", "y", "[SEP]"],
        ["[CLS]", "cat", "[SEP]", "dog", "[SEP]"],
        ["[CLS]", "good", "dog", "[SEP]", "bad", "cat", "[SEP]"],
    ]
    assert [types.tolist() for types in data.segments][0] == [0, 0, 0, 0, 0, 1, 1, 1]
    assert data.labels.tolist() == [0.0, 1.0, 1.0]
    dropped = encode_task(texts, tokenizer, 8, "drop", "glue_rte")
    assert (dropped.n_overlong, dropped.data.example_ids, dropped.data.labels.tolist()) == (1, [5, 7], [1.0, 1.0])
    inputs = pad_inputs(data, [1, 2], pad_token_id=0, with_token_types=True)
    assert inputs["attention_mask"].tolist() == [[1, 1, 1, 1, 1, 0, 0], [1] * 7]
    assert inputs["token_type_ids"].tolist() == [[0, 0, 0, 1, 1, 0, 0], [0, 0, 0, 0, 1, 1, 1]]
    assert length_sorted_batches(data, 2) == [[1, 2], [0]]
    with pytest.raises(ValueError, match="1 examples of 'glue_rte' have no label .first example_id 5"):
        encode_task(texts.with_columns(label=pl.Series([1.0, 0.0, None])), tokenizer, 8, "truncate", "glue_rte")
    with pytest.raises(ValueError, match="overlong must be one of"):
        encode_task(texts, tokenizer, 8, "cut", "glue_rte")


def test_fine_tuning_moves_the_loss_down_and_is_seeded(tiny_model_dir: Path):
    data = _toy_task(64)
    recipe = Recipe(learning_rate=1e-2, batch_size=16, epochs=10, max_steps=30, seed=3, warmup_ratio=0.0)
    seen = []
    model = build_classifier(str(tiny_model_dir), "sst2", "pretrained", seed=3)
    log = fine_tune(
        model, data, recipe, 0, True, progress=lambda step, steps, loss, seconds: seen.append((step, steps))
    )
    assert log.steps == 30 and len(log.losses) == 30 and seen[-1] == (30, 30)
    assert log.losses[0] == pytest.approx(math.log(2), abs=0.01)  # chance at the start
    assert max(log.losses[-5:]) < 0.1
    assert glue_metrics("sst2", predict_logits(model, data, 0, True), data.labels) == {"accuracy": 1.0}
    again = fine_tune(build_classifier(str(tiny_model_dir), "sst2", "pretrained", seed=3), data, recipe, 0, True)
    assert again.losses == log.losses


def test_recipe_budget_subset_and_epochs(tiny_model_dir: Path):
    model = build_classifier(str(tiny_model_dir), "stsb", "pretrained", seed=0)
    log = fine_tune(model, _toy_task(64), Recipe(batch_size=8, epochs=2, train_subset=20), 0, True)
    assert (log.train_examples, log.steps) == (20, 2 * 3)  # ceil(20 / 8) = 3 steps per epoch
    assert model.config.problem_type == "regression" and model.config.num_labels == 1


def test_random_init_draws_fresh_encoder_weights(tiny_model_dir: Path):
    pretrained = build_classifier(str(tiny_model_dir), "rte", "pretrained", seed=0)
    random = build_classifier(str(tiny_model_dir), "rte", "random", seed=0)
    same_seed = build_classifier(str(tiny_model_dir), "rte", "random", seed=0)
    name = "bert.encoder.layer.0.attention.self.query.weight"
    assert not torch.equal(pretrained.state_dict()[name], random.state_dict()[name])
    assert torch.equal(random.state_dict()[name], same_seed.state_dict()[name])
    with pytest.raises(ValueError, match="init must be"):
        build_classifier(str(tiny_model_dir), "rte", "normal", seed=0)


def test_checkpoint_round_trip(tiny_model_dir: Path, tmp_path: Path):
    from transformers import AutoModel, AutoTokenizer

    model = build_classifier(str(tiny_model_dir), "rte", "pretrained", seed=0)
    log = fine_tune(model, _toy_task(8), Recipe(batch_size=4, epochs=1), 0, True)
    record = recipe_record(Recipe(batch_size=4, epochs=1), str(tiny_model_dir), "rte", log)
    folder = save_checkpoint(
        model, AutoTokenizer.from_pretrained(tiny_model_dir), tmp_path / "finetuned" / "tiny--rte", record
    )
    assert json.loads((folder / "recipe.json").read_text())["steps"] == 2
    encoder = AutoModel.from_pretrained(folder)  # attention analyses load the encoder part
    assert torch.equal(encoder.state_dict()["pooler.dense.weight"], model.state_dict()["bert.pooler.dense.weight"])


@pytest.mark.integration
def test_minilm_rte_slice(shared_data_dir: Path):
    """Real data end to end through the pure functions (~16 s on 2 busy cores): 64 RTE train
    pairs, 4 steps; baseline, one head and one layer disabled on 8 validation pairs."""
    from transformers import AutoTokenizer

    from dagster_project.compute.models import DEFAULT_MODEL, resolve_source
    from dagster_project.corpora import read_glue

    path = resolve_source(DEFAULT_MODEL)[0]
    tokenizer = AutoTokenizer.from_pretrained(path)

    def encoded(split: str, size: int) -> TaskData:
        texts = read_glue(shared_data_dir, "rte", split).texts.head(size)
        return encode_task(texts, tokenizer, 128, "truncate", f"glue_rte_{split}").data

    train, validation = encoded("train", 64), encoded("validation", 8)
    assert set(train.labels.tolist()) == {0.0, 1.0}
    model = build_classifier(path, "rte", "pretrained", seed=0)
    log = fine_tune(model, train, Recipe(batch_size=8, max_steps=4, learning_rate=5e-5), tokenizer.pad_token_id, True)
    assert log.steps == 4 and all(math.isfinite(loss) for loss in log.losses)
    logits = predict_logits(model, validation, tokenizer.pad_token_id, True)
    assert 0.0 <= glue_metrics("rte", logits, validation.labels)["accuracy"] <= 1.0
    settings = ablation_settings(6, 12)
    batches = length_sorted_batches(validation, 8)
    inputs = [pad_inputs(validation, batch, tokenizer.pad_token_id, True) for batch in batches]
    chosen = settings.disabled[[0, 1, 1 + 72]]  # nothing, head 1-1, layer 1
    ablated = settings_logits(use_ablation_attention(model), inputs, chosen, batch_tokens=8192)
    assert ablated.shape == (3, 8, 2)
    assert torch.allclose(ablated[0], logits[batches[0]], atol=1e-5)
    assert not torch.allclose(ablated[2], ablated[0], atol=1e-4)


RESUMABLE = Recipe(learning_rate=1e-2, batch_size=8, epochs=3, seed=5, warmup_ratio=0.2)  # 24 examples: 9 steps


def _weights(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: value.clone() for name, value in model.state_dict().items()}


def _assert_same_weights(got: dict[str, torch.Tensor], expected: dict[str, torch.Tensor]) -> None:
    assert got.keys() == expected.keys()
    for name in expected:
        assert torch.equal(got[name], expected[name]), name


def test_out_of_memory_halves_the_micro_batch_and_trains_as_a_run_at_it(tiny_model_dir: Path, caplog):
    data = _toy_task(24)
    model = build_classifier(str(tiny_model_dir), "sst2", "pretrained", seed=5)
    with caplog.at_level("WARNING"), out_of_memory_above(model, 2, batch_rows) as tried:
        log = fine_tune(model, data, RESUMABLE, 0, True)
    assert [record.getMessage() for record in caplog.records if record.name == "dagster_project.compute.backoff"] == [
        "Fine-tuning: out of memory on cpu at 8 examples per micro-batch, retrying at 4",
        "Fine-tuning: out of memory on cpu at 4 examples per micro-batch, retrying at 2",
    ]
    assert tried[:3] == [8, 4, 2] and set(tried[3:]) == {2}  # every later step in micro-batches of 2
    assert (log.steps, log.micro_batch) == (9, 2)
    reference = build_classifier(str(tiny_model_dir), "sst2", "pretrained", seed=5)
    at_two = fine_tune(reference, data, RESUMABLE, 0, True, micro_batch=2)
    assert log.losses == at_two.losses
    _assert_same_weights(_weights(model), _weights(reference))
    # without dropout (whose masks are drawn per micro-batch), micro-batches train as the whole batch does
    whole = fine_tune(
        _without_dropout(build_classifier(str(tiny_model_dir), "sst2", "pretrained", 5)), data, RESUMABLE, 0, True
    )
    in_threes = fine_tune(
        _without_dropout(build_classifier(str(tiny_model_dir), "sst2", "pretrained", 5)),
        data,
        RESUMABLE,
        0,
        True,
        micro_batch=3,
    )
    assert in_threes.losses == pytest.approx(whole.losses, rel=1e-5) and in_threes.micro_batch == 3


def _without_dropout(model: torch.nn.Module) -> torch.nn.Module:
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    return model


def test_out_of_memory_at_one_example_names_what_to_lower(tiny_model_dir: Path):
    model = build_classifier(str(tiny_model_dir), "sst2", "pretrained", seed=5)
    with out_of_memory_above(model, 0, batch_rows), pytest.raises(PassOutOfMemory) as raised:
        fine_tune(model, _toy_task(8), RESUMABLE, 0, True)
    message = str(raised.value)
    assert message.startswith(
        "Fine-tuning: out of memory on cpu even at its smallest size (examples per micro-batch: 1)"
    )
    assert "Lower max_len (run config of the finetuned asset)" in message


class Killed(Exception):
    """Stands for a kill of the run after some step."""


def _killed_after(step_killed: int, tiny_model_dir: Path, tmp_path: Path) -> tuple[TaskData, TrainingCheckpoints]:
    """A RESUMABLE fine-tune of 24 toy examples, its state saved every 3 steps, killed after `step_killed`:
    its data and checkpoints."""
    data = _toy_task(24)
    checkpoints = TrainingCheckpoints(tmp_path / "state", every=3)

    def killed(step: int, steps: int, loss: float, seconds: float) -> None:
        if step == step_killed:
            raise Killed

    with pytest.raises(Killed):
        model = build_classifier(str(tiny_model_dir), "sst2", "pretrained", seed=5)
        fine_tune(model, data, RESUMABLE, 0, True, killed, checkpoints=checkpoints)
    return data, checkpoints


def test_a_killed_fine_tuning_resumes_from_its_last_saved_state(tiny_model_dir: Path, tmp_path: Path, caplog):
    data, checkpoints = _killed_after(7, tiny_model_dir, tmp_path)
    uninterrupted = build_classifier(str(tiny_model_dir), "sst2", "pretrained", seed=5)
    expected = fine_tune(uninterrupted, data, RESUMABLE, 0, True)
    assert checkpoints.path.is_file()  # saved after steps 3 and 6
    resumed_model = build_classifier(str(tiny_model_dir), "sst2", "pretrained", seed=5)
    with caplog.at_level("INFO"):
        resumed = fine_tune(resumed_model, data, RESUMABLE, 0, True, checkpoints=checkpoints)
    assert resumed.resumed_at == 6 and f"resumed after step 6/9 from {checkpoints.path}" in caplog.text
    assert resumed.losses == expected.losses and len(resumed.losses) == 9
    _assert_same_weights(_weights(resumed_model), _weights(uninterrupted))  # dropout masks included

    # The state after the last step stays: a run killed after this fine-tuning (in a later setting of
    # its task) trains nothing again here.
    finished_model = build_classifier(str(tiny_model_dir), "sst2", "pretrained", seed=5)
    finished = fine_tune(finished_model, data, RESUMABLE, 0, True, checkpoints=checkpoints)
    assert finished.resumed_at == 9 and finished.losses == expected.losses
    _assert_same_weights(_weights(finished_model), _weights(uninterrupted))


def test_a_saved_state_of_another_recipe_is_not_resumed(tiny_model_dir: Path, tmp_path: Path, caplog):
    data, checkpoints = _killed_after(4, tiny_model_dir, tmp_path)
    other = replace(RESUMABLE, learning_rate=5e-3)
    with caplog.at_level("WARNING"):
        log = fine_tune(
            build_classifier(str(tiny_model_dir), "sst2", "pretrained", seed=5),
            data,
            other,
            0,
            True,
            checkpoints=checkpoints,
        )
    assert log.resumed_at == 0 and "was saved by another fine-tuning run" in caplog.text
    fresh = fine_tune(build_classifier(str(tiny_model_dir), "sst2", "pretrained", seed=5), data, other, 0, True)
    assert log.losses == fresh.losses


def _linear_output_dtypes(model: torch.nn.Module) -> list[torch.dtype]:
    """Records the dtype of every output of the model's first linear layer (the first query projection)."""
    seen = []
    linear = next(module for module in model.modules() if isinstance(module, torch.nn.Linear))
    linear.register_forward_hook(lambda module, inputs, output: seen.append(output.dtype))
    return seen


def test_bfloat16_trains_under_autocast_with_float32_weights_and_follows_float32(tiny_model_dir: Path):
    data = _toy_task(64)
    recipe = Recipe(learning_rate=1e-2, batch_size=16, epochs=10, max_steps=20, seed=3, warmup_ratio=0.0)
    runs = {}
    for precision in ("float32", "bfloat16"):
        model = _without_dropout(build_classifier(str(tiny_model_dir), "sst2", "pretrained", seed=3))
        dtypes = _linear_output_dtypes(model)
        log = fine_tune(model, data, replace(recipe, precision=precision), 0, True)
        assert log.precision == precision and set(dtypes) == {getattr(torch, precision)}  # 20 steps, 1 pass each
        assert len(dtypes) == 20 and {p.dtype for p in model.parameters()} == {torch.float32}
        logits = predict_logits(model, data, 0, True)
        assert logits.dtype == torch.float32 and set(dtypes[20:]) == {torch.float32}  # scoring: float32
        runs[precision] = log.losses
    # Both start at chance (log 2) and learn the one-token task (float32: 0.692 to 0.068 in 20 steps, the
    # learning rate decaying to 0); bfloat16's 8-bit significand moves a step's loss by under 0.005 here.
    assert runs["bfloat16"][0] == pytest.approx(math.log(2), abs=0.01)
    assert all(math.isfinite(loss) for loss in runs["bfloat16"]) and runs["bfloat16"][-1] < 0.1
    assert runs["bfloat16"] == pytest.approx(runs["float32"], abs=0.01)
    assert runs["bfloat16"] != runs["float32"]  # not the float32 path again


@pytest.mark.parametrize(
    ("machine", "onednn", "avx512_bf16", "amx", "cpu_precision"),
    [
        ("x86_64", True, False, True, "bfloat16"),  # Sapphire Rapids and later
        ("x86_64", True, True, False, "bfloat16"),  # Cooper Lake, Zen 4
        ("x86_64", True, False, False, "float32"),  # AVX-512 without bfloat16 instructions: emulated
        ("x86_64", False, False, False, "float32"),  # AVX2 only
        ("aarch64", True, False, False, "bfloat16"),  # Arm with BF16
        ("aarch64", False, False, False, "float32"),
    ],
)
def test_auto_precision_is_bfloat16_where_the_device_has_bfloat16_units(
    machine: str, onednn: bool, avx512_bf16: bool, amx: bool, cpu_precision: str, monkeypatch: pytest.MonkeyPatch
):
    cpu = torch.device("cpu")
    monkeypatch.setattr(platform, "machine", lambda: machine)
    monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: onednn)
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: avx512_bf16)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx)
    assert training_precision("auto", cpu) == cpu_precision
    assert training_precision("float32", cpu) == "float32" and training_precision("bfloat16", cpu) == "bfloat16"
    with pytest.raises(ValueError, match=r"precision must be one of \['auto', 'float32', 'bfloat16'\], got 'fp16'"):
        training_precision("fp16", cpu)


@pytest.mark.parametrize("ampere", [True, False])
def test_auto_precision_on_a_gpu_is_bfloat16_from_ampere_on(ampere: bool, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(torch.cuda, "device", lambda device: contextlib.nullcontext())
    # before Ampere, CUDA supports bfloat16 only by emulation, which does not count
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation: including_emulation or ampere)
    assert training_precision("auto", torch.device("cuda", 0)) == ("bfloat16" if ampere else "float32")
    mps = torch.device("mps")
    assert training_precision("auto", mps) == "float32" and training_precision("bfloat16", mps) == "bfloat16"


@pytest.mark.parametrize(("units", "used"), [(True, "bfloat16"), (False, "float32")])
def test_auto_precision_is_recorded_as_the_precision_used(
    units: bool, used: str, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
):
    recipe = Recipe(batch_size=4, epochs=1, precision="auto")
    monkeypatch.setattr(finetuning, "bfloat16_units", lambda device: units)
    log = fine_tune(build_classifier(str(tiny_model_dir), "rte", "pretrained", 0), _toy_task(8), recipe, 0, True)
    record = recipe_record(recipe, str(tiny_model_dir), "rte", log)
    assert (log.precision, record["precision"], record["steps"]) == (used, used, 2)
    assert recipe_record(recipe, str(tiny_model_dir), "rte", None)["precision"] == "auto"  # nothing trained


def test_a_saved_state_resumes_only_in_the_precision_it_was_trained_in(
    tiny_model_dir: Path, tmp_path: Path, caplog, monkeypatch: pytest.MonkeyPatch
):
    data, checkpoints = _killed_after(4, tiny_model_dir, tmp_path)
    # auto on a device without bfloat16 units trains in float32, as the saved state was: resumed
    monkeypatch.setattr(finetuning, "bfloat16_units", lambda device: False)
    auto = replace(RESUMABLE, precision="auto")
    resumed = fine_tune(
        build_classifier(str(tiny_model_dir), "sst2", "pretrained", 5), data, auto, 0, True, checkpoints=checkpoints
    )
    assert resumed.resumed_at == 3 and resumed.precision == "float32"
    # the state is now the finished float32 run's; bfloat16 (asked, or auto with bfloat16 units) starts afresh
    monkeypatch.setattr(finetuning, "bfloat16_units", lambda device: True)
    with caplog.at_level("WARNING"):
        log = fine_tune(
            build_classifier(str(tiny_model_dir), "sst2", "pretrained", 5), data, auto, 0, True, checkpoints=checkpoints
        )
    assert (log.resumed_at, log.precision, len(log.losses)) == (0, "bfloat16", 9)
    assert "'precision': 'float32'" in caplog.text and "was saved by another fine-tuning run" in caplog.text
