"""Where the passes compute: the device (cpu, cuda, cuda:N, mps) and the forward dtype.

Chosen once, by the ATTN_DEVICE / ATTN_DTYPE settings or the Dagster `compute` resource, and
carried by the loaded model (models.LoadedEncoder.compute): batches go to its device, the
statistics are taken there in float32, and their rows come back to the CPU for writing.
A low-precision dtype (bfloat16, float16) is for forward-only passes; the passes that take
gradients (gradient importance, HTA, fine-tuning, probe training) always run in float32.
"""

import platform
from collections.abc import Sequence
from dataclasses import dataclass

import torch

DEVICE_SETTING, DTYPE_SETTING = "ATTN_DEVICE", "ATTN_DTYPE"
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
_DTYPE_ALIASES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "half": "float16"}
# Padded positions per forward batch by device type (a backward pass takes half: it keeps every
# layer's activations). CPU: the budget measured on 2 cores. CUDA: attention maps of a batch
# take batch_tokens x T x layers x heads x 4 bytes, 4.8 GB for bert-base at T = 512; not tuned
# on a GPU yet. MPS shares the machine's memory.
BATCH_TOKENS = {"cpu": 4096, "cuda": 16384, "mps": 8192}


class DeviceSettingError(ValueError):
    """A device or dtype setting that names nothing usable on this machine."""


@dataclass(frozen=True)
class ComputeDevice:
    """A resolved device and forward dtype."""

    device: torch.device
    dtype: torch.dtype = torch.float32

    @property
    def low_precision(self) -> bool:
        """Whether the forward dtype is other than float32 (a pass that takes gradients then runs in float32)."""
        return self.dtype != torch.float32

    def batch_tokens(self, backward: bool = False) -> int:
        """The default padded positions per batch on this device (half for a backward pass)."""
        tokens = BATCH_TOKENS.get(self.device.type, BATCH_TOKENS["cpu"])
        return tokens // 2 if backward else tokens

    def float32(self) -> "ComputeDevice":
        """The same device in float32, for passes that take gradients."""
        return ComputeDevice(self.device)

    def float32_note(self, pass_name: str) -> str | None:
        """What to tell the user when a gradient pass runs in float32 despite a low-precision setting."""
        if not self.low_precision:
            return None
        return (
            f"{pass_name} takes gradients, so it runs in float32 on {self.device}; the {dtype_name(self.dtype)} "
            f"forward dtype ({DTYPE_SETTING}) applies to forward-only passes."
        )

    def __str__(self) -> str:
        return f"{self.device} {dtype_name(self.dtype)}"


CPU = ComputeDevice(torch.device("cpu"))


def sum_dtype(device: torch.device) -> torch.dtype:
    """The dtype long sums accumulate in on `device`: float64, except on MPS, which has none."""
    return torch.float32 if device.type == "mps" else torch.float64


# Scratch space of a chunked reduction (the head-pair JS mixtures: one chunk is a loop of small ops per
# head). On 2 CPU cores 16 MiB was fastest (MiniLM, 64 wiki_segments examples: 2.7 s, against 4.2 s at
# 4 MiB and 4.1 s at 128 MiB); on a GPU large, since small chunks leave the device idle.
CPU_SCRATCH_BYTES = 2**24
GPU_SCRATCH_BYTES = 2**30


def scratch_bytes(device: torch.device) -> int:
    """Bytes one chunk of a chunked reduction may take on `device` (a CUDA device: also at most an
    eighth of its free memory)."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return max(CPU_SCRATCH_BYTES, min(GPU_SCRATCH_BYTES, free // 8))
    return GPU_SCRATCH_BYTES // 16 if device.type == "mps" else CPU_SCRATCH_BYTES


def synchronize(device: torch.device) -> None:
    """Wait until `device` has finished the work queued on it (a no-op on the CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def to_host(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The tensors on the CPU, copied from their device without waiting after each one: every copy
    is queued (non_blocking) and the device is waited for once."""
    devices = {tensor.device for tensor in tensors.values()}
    moved = {name: tensor.to("cpu", non_blocking=True) for name, tensor in tensors.items()}
    for device in devices:
        synchronize(device)
    return moved


def dtype_name(dtype: torch.dtype) -> str:
    """The dtype as settings and messages write it: `bfloat16`, not `torch.bfloat16`."""
    return str(dtype).removeprefix("torch.")


def resolve_device(text: str, setting: str = DEVICE_SETTING) -> torch.device:
    """The torch device `text` names (auto: cuda if available, else mps, else cpu), checked to
    exist here; `setting` names where the value came from, for the error message."""
    value = text.strip().lower()
    if value == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda", torch.cuda.current_device())
        return torch.device("mps") if torch.backends.mps.is_available() else torch.device("cpu")
    fix = f"Set {setting} to one of auto, cpu, cuda, cuda:N (N < the CUDA device count) or mps."
    try:
        device = torch.device(value)
    except RuntimeError:
        raise DeviceSettingError(f"{setting}={text!r} is not a device. {fix}") from None
    if device.type == "cpu" and device.index in (None, 0):
        return torch.device("cpu")
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise DeviceSettingError(
                f"{setting}={text!r}, but this machine has no usable CUDA device (torch {torch.__version__}, built "
                f"for CUDA {torch.version.cuda or 'none'}; torch.cuda.is_available() is False). Set {setting}=cpu or "
                "auto, or install a CUDA build of torch on a machine with an NVIDIA GPU."
            )
        count = torch.cuda.device_count()
        index = torch.cuda.current_device() if device.index is None else device.index
        if index >= count:
            raise DeviceSettingError(
                f"{setting}={text!r}, but this machine has {count} CUDA device{'s' if count != 1 else ''} "
                f"(cuda:0..cuda:{count - 1}). Set {setting} to one of those, or to cuda or auto."
            )
        return torch.device("cuda", index)
    if device.type == "mps":
        if not torch.backends.mps.is_available():
            raise DeviceSettingError(
                f"{setting}={text!r}, but Apple's MPS backend is not available here "
                f"(torch.backends.mps.is_available() is False). Set {setting}=cpu or auto."
            )
        return torch.device("mps")
    raise DeviceSettingError(f"{setting}={text!r}: device type '{device.type}' is not supported. {fix}")


def resolve_dtype(text: str, setting: str = DTYPE_SETTING) -> torch.dtype:
    """The forward dtype `text` names: float32 (default), bfloat16 or float16 (aliases fp32, bf16, fp16)."""
    value = text.strip().lower().removeprefix("torch.")
    name = _DTYPE_ALIASES.get(value, value)
    if name not in DTYPES:
        raise DeviceSettingError(
            f"{setting}={text!r} is not a forward dtype. Set {setting} to float32 (default), bfloat16 or float16."
        )
    return DTYPES[name]


def resolve(
    device: str, dtype: str, device_setting: str = DEVICE_SETTING, dtype_setting: str = DTYPE_SETTING
) -> ComputeDevice:
    """A ComputeDevice from the settings' texts; `*_setting` name where they came from."""
    return ComputeDevice(resolve_device(device, device_setting), resolve_dtype(dtype, dtype_setting))


def float32_maps(attentions: Sequence[torch.Tensor]) -> torch.Tensor:
    """(B, L, H, T, T) float32 maps from a forward's per-layer attentions, for the statistics.
    A low-precision forward's rows are renormalized after the cast: rounding each probability to
    bfloat16 leaves rows that sum to 1 only within ~3e-3, and the statistics assume rows summing to 1.
    One layer's float32 maps (what the attention pass hands on per layer) come back as a view, not a copy."""
    attentions = tuple(attentions)
    attn = attentions[0].unsqueeze(1) if len(attentions) == 1 else torch.stack(attentions, dim=1)
    if attn.dtype == torch.float32:
        return attn
    attn = attn.float()
    return attn / attn.sum(-1, keepdim=True)


def bfloat16_units(device: torch.device) -> bool:
    """Whether `device` runs bfloat16 matrix products natively: a CUDA device that supports bfloat16
    without emulation (Ampere and later), or a CPU that oneDNN runs bfloat16 on with bfloat16
    instructions (x86: AVX512_BF16 or AMX; Arm: its BF16 extension, which oneDNN requires)."""
    if device.type == "cuda":
        with torch.cuda.device(device):
            return torch.cuda.is_bf16_supported(including_emulation=False)
    if device.type == "cpu":
        # oneDNN takes bfloat16 on any AVX-512 x86 too, converting to float32 there: no faster than float32.
        native = platform.machine().lower() in ("aarch64", "arm64") or (
            torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported()
        )
        return native and bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    return False
