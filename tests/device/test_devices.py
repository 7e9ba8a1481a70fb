"""Choosing the compute device and dtype: settings and clear errors (the Dagster resource that reads
the settings: tests/assets/test_compute_resource.py)."""

import pytest
import torch

from dagster_project.compute.devices import (
    CPU,
    ComputeDevice,
    DeviceSettingError,
    float32_maps,
    resolve_device,
    resolve_dtype,
    sum_dtype,
)


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
