"""What a device computes in: the dtype `PrecisionConfig(compute="auto")` picks for a torso on a
device, and what fp32 matmuls really are there (TF32, TPU passes). `precision.resolve_precision`
reads them; docs/mixed-precision.md has the table."""

from __future__ import annotations

from typing import Any

# Compute capability from which NVIDIA GPUs have bf16 tensor cores (Ampere).
BF16_FROM_COMPUTE_CAPABILITY = 8.0

# Where `compute="auto"` goes low precision: only a torso whose matmuls and convolutions are big
# enough for tensor cores to pay for the casts (the Nature CNN on 84x84 frames). The MLPs and the
# MinAtar CNN stay fp32 everywhere: their presets were tuned in fp32 and their layers are too
# small for low precision to buy time.
LOW_PRECISION_TORSOS = ("nature",)
# Compute capability from which NVIDIA GPUs have fp16 tensor cores (Volta).
TENSOR_CORES_FROM_COMPUTE_CAPABILITY = 7.0


def _capability(device: Any) -> float | None:
    try:
        return float(getattr(device, "compute_capability", None))
    except (TypeError, ValueError):
        return None


def auto_compute(device: Any, torso: str = "mlp") -> tuple[str, str]:
    """The compute dtype `compute="auto"` picks for a network with `torso` on `device`, and why.

    fp32 for the MLP and MinAtar-sized ("cnn") torsos on every device. The Nature CNN: bf16 on
    NVIDIA GPUs from compute capability 8.0 (Ampere) and on TPU, fp16 (with dynamic loss scaling)
    on GPUs with tensor cores but no bf16 (7.x: V100, T4), fp32 on older GPUs and on CPU
    (XLA:CPU upcasts bf16/f16 dots and convolutions to f32, so low precision only adds converts),
    and on a GPU whose capability cannot be read.
    """
    platform = str(getattr(device, "platform", "cpu")).lower()
    kind = str(getattr(device, "device_kind", platform))
    if torso not in LOW_PRECISION_TORSOS:
        return "fp32", f"auto: fp32 for the {torso} torso on every device"
    if platform == "tpu":
        return "bf16", f"auto: TPU {kind!r} computes in bf16"
    if platform in ("gpu", "cuda", "rocm"):
        capability = getattr(device, "compute_capability", None)
        major_minor = _capability(device)
        if major_minor is None:
            return "fp32", f"auto: GPU {kind!r} with unknown compute capability {capability!r}"
        if major_minor >= BF16_FROM_COMPUTE_CAPABILITY:
            return "bf16", f"auto: GPU {kind!r} (compute capability {capability}) has bf16"
        if major_minor >= TENSOR_CORES_FROM_COMPUTE_CAPABILITY:
            return "fp16", f"auto: GPU {kind!r} (compute capability {capability}) has no bf16"
        return "fp32", f"auto: GPU {kind!r} (compute capability {capability}) has no tensor cores"
    return "fp32", f"auto: {platform} {kind!r} computes low precision in f32"


def matmul_arithmetic(compute: str, matmul_precision: str, device: Any) -> str:
    """What the matmuls and convolutions of a network computing in `compute` really do on
    `device`: "TF32" for fp32 inputs at precision "default"/"high" on an Ampere or newer NVIDIA
    GPU (a 10-bit mantissa, not fp32), "bf16 passes" on a TPU below "highest"; else `compute`."""
    platform = str(getattr(device, "platform", "cpu")).lower()
    if compute != "fp32" or matmul_precision == "highest":
        return compute
    if platform in ("gpu", "cuda"):
        capability = _capability(device)
        if capability is not None and capability >= BF16_FROM_COMPUTE_CAPABILITY:
            return "TF32"
    if platform == "tpu":
        return "bf16 passes" if matmul_precision == "default" else "bf16x3 passes"
    return "fp32"
