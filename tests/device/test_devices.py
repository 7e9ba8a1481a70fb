"""Choosing the compute device and dtype: settings, the Dagster resource, and clear errors."""

import pytest
import torch

from dagster_project.compute.devices import (
    CPU,
    ComputeDevice,
    DeviceSettingError,
    float32_maps,
    resolve,
    resolve_device,
    resolve_dtype,
    sum_dtype,
)
from dagster_project.defs.resources import ComputeResource, default_resources


@pytest.fixture
def no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)


@pytest.fixture
def one_cuda_device(monkeypatch: pytest.MonkeyPatch) -> None:
    """What torch reports on a machine with one CUDA device (nothing is allocated on it)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)


def test_auto_prefers_cuda_then_mps_then_cpu(no_gpu, monkeypatch: pytest.MonkeyPatch):
    assert resolve_device("auto") == torch.device("cpu")
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    assert resolve_device("auto") == torch.device("mps")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    assert resolve_device(" AUTO ") == torch.device("cuda", 0)


def test_named_devices(one_cuda_device):
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device("cuda") == torch.device("cuda", 0)
    assert resolve_device("cuda:0") == torch.device("cuda", 0)


def test_cuda_without_cuda_names_the_setting_and_the_fix(no_gpu):
    with pytest.raises(
        DeviceSettingError, match=r"ATTN_DEVICE='cuda', but this machine has no usable CUDA device"
    ) as error:
        resolve_device("cuda")
    assert "Set ATTN_DEVICE=cpu or auto" in str(error.value)


def test_a_device_index_beyond_the_count_is_refused(one_cuda_device):
    with pytest.raises(
        DeviceSettingError, match=r"ATTN_DEVICE='cuda:3', but this machine has 1 CUDA device \(cuda:0\.\.cuda:0\)"
    ):
        resolve_device("cuda:3")


def test_mps_without_mps_and_unknown_devices_are_refused(no_gpu):
    with pytest.raises(DeviceSettingError, match="MPS backend is not available"):
        resolve_device("mps")
    with pytest.raises(DeviceSettingError, match=r"ATTN_DEVICE='gpu' is not a device\. Set ATTN_DEVICE to one of auto"):
        resolve_device("gpu")
    with pytest.raises(DeviceSettingError, match="device type 'meta' is not supported"):
        resolve_device("meta")


def test_dtypes_and_their_aliases():
    assert resolve_dtype("float32") == torch.float32
    assert resolve_dtype("bf16") == torch.bfloat16
    assert resolve_dtype("torch.float16") == torch.float16
    with pytest.raises(
        DeviceSettingError, match=r"ATTN_DTYPE='int8' is not a forward dtype\. Set ATTN_DTYPE to float32"
    ):
        resolve_dtype("int8")


def test_batch_tokens_default_by_device_and_halve_for_backward():
    assert CPU.batch_tokens() == 4096 and CPU.batch_tokens(backward=True) == 2048
    assert ComputeDevice(torch.device("cuda", 1)).batch_tokens() == 16384
    assert ComputeDevice(torch.device("mps")).batch_tokens(backward=True) == 4096


def test_long_sums_are_float64_except_on_mps():
    assert sum_dtype(torch.device("cpu")) == sum_dtype(torch.device("cuda", 0)) == torch.float64
    assert sum_dtype(torch.device("mps")) == torch.float32  # MPS has no float64


def test_gradient_passes_run_in_float32_and_say_so():
    low = ComputeDevice(torch.device("cpu"), torch.bfloat16)
    assert low.float32() == CPU and CPU.float32_note("HTA") is None
    assert low.float32_note("HTA") == (
        "HTA takes gradients, so it runs in float32 on cpu; the bfloat16 forward dtype (ATTN_DTYPE) "
        "applies to forward-only passes."
    )


def test_float32_maps_renormalize_low_precision_rows_only():
    rows = torch.tensor([[0.3, 0.3, 0.4], [0.1, 0.2, 0.7]])
    full = float32_maps([rows[None, None]])  # one layer: (B=1, H=1, T, T) -> (1, 1, 1, T, T)
    assert full.shape == (1, 1, 1, 2, 3) and torch.equal(full[0, 0, 0], rows)
    low = float32_maps([rows.to(torch.bfloat16)[None, None]])
    assert low.dtype == torch.float32
    assert (rows.to(torch.bfloat16).float().sum(-1) - 1).abs().max() > 1e-4  # bf16 rounding moves the sums
    assert torch.allclose(low[0, 0, 0].sum(-1), torch.ones(2), atol=1e-6)


def test_the_resource_reads_the_settings_at_run_time(no_gpu, monkeypatch: pytest.MonkeyPatch):
    assert default_resources()["compute"].resolve() == CPU  # auto on a CPU-only machine, float32
    monkeypatch.setenv("ATTN_DTYPE", "bfloat16")
    assert ComputeResource().resolve() == ComputeDevice(torch.device("cpu"), torch.bfloat16)
    assert ComputeResource(dtype="float32").resolve() == CPU  # run config overrides the environment
    monkeypatch.setenv("ATTN_DEVICE", "cuda:1")
    with pytest.raises(DeviceSettingError, match="ATTN_DEVICE='cuda:1'"):
        ComputeResource().resolve()
    with pytest.raises(DeviceSettingError, match="resource compute.device='cuda'"):
        ComputeResource(device="cuda").resolve()
    assert resolve("cpu", "bf16") == ComputeDevice(torch.device("cpu"), torch.bfloat16)


def test_a_pass_with_an_unusable_device_fails_before_writing(no_gpu, tiny_model_dir, resources: dict):
    from dagster import DagsterInstance, materialize

    from dagster_project.defs.assets import all_assets, corpus_assets_by_name, fact_assets_by_corpus, warehouse_views
    from dagster_project.defs.registration import register_model

    instance = DagsterInstance.ephemeral()
    model_id = register_model(str(tiny_model_dir), instance, resources["warehouse"]).model_id
    assert materialize([warehouse_views], instance=instance, resources=resources).success
    assert materialize(
        all_assets,
        selection=[corpus_assets_by_name["demo"]],
        partition_key=model_id,
        instance=instance,
        resources=resources,
    ).success
    result = materialize(
        all_assets,
        selection=[fact_assets_by_corpus["demo"]],
        partition_key=model_id,
        instance=instance,
        resources={**resources, "compute": ComputeResource(device="cuda")},
        raise_on_error=False,
    )
    assert not result.success
    error = result.get_step_failure_events()[0].step_failure_data.error
    while error.cause is not None and "DeviceSettingError" not in error.cls_name:
        error = error.cause
    assert error.cls_name == "DeviceSettingError"
    assert "resource compute.device='cuda', but this machine has no usable CUDA device" in error.message
    with resources["warehouse"].get_connection() as conn:
        assert conn.execute("SELECT count(*) FROM head_summaries").fetchone() == (0,)
