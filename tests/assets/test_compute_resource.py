"""The Dagster resource that chooses the compute device and dtype: it reads the settings when a run
starts, and a pass with an unusable device fails before it writes anything."""

import pytest
import torch
from dagster import DagsterInstance, materialize

from dagster_project.compute.devices import CPU, ComputeDevice, DeviceSettingError, resolve
from dagster_project.defs.assets import all_assets, corpus_assets_by_name, fact_assets_by_corpus, warehouse_views
from dagster_project.defs.registration import register_model
from dagster_project.defs.resources import ComputeResource, default_resources


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
