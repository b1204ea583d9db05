"""Mixed-precision settings: compute dtype, loss scaling, the fp32 fallback."""

from __future__ import annotations

import dataclasses
import math

from jaxrl_fast.config.fields import config_class, is_int, is_num, knob, require

_COMPUTE = ("auto", "fp32", "bf16", "fp16")
_MATMUL = ("default", "high", "highest")


@config_class
@dataclasses.dataclass(frozen=True, kw_only=True)
class PrecisionConfig:
    """Mixed precision: the compute dtype, loss scaling and the fallback to fp32.

    Parameters, optimiser state and the update are always fp32 (master weights); only the
    network's forward and backward passes run in `compute`. Q-values and the loss are fp32.

    Attributes:
      compute: "fp32", "bf16", "fp16", or "auto": fp32 for the MLP and MinAtar-sized ("cnn")
        networks on every device, and on CPU for every network (XLA:CPU computes bf16/f16 dots
        in f32, so low precision is only slower there); the Nature CNN computes in bf16 on
        Ampere and newer GPUs and on TPU, and in fp16 with dynamic loss scaling on GPUs with
        tensor cores but no bf16 (compute capability 7.x: V100, T4). docs/mixed-precision.md
        has the table.
      loss_scale: "dynamic", "static:<value>" (e.g. "static:1024"), "none", or "auto" (dynamic
        for fp16, none otherwise). With a scale, or any compute below fp32, an update whose
        gradients are not all finite is skipped: parameters and optimiser state stay as they were.
      matmul_precision: "default", "high" or "highest": precision of matmuls and convolutions
        (on Ampere and newer GPUs "default"/"high" run fp32 inputs as TF32, and on TPU as bf16
        passes; "highest" is fp32 everywhere). `run.describe()` names what the run's matmuls do.
      fallback: opt-in (low-precision compute only): switch the run's compute to fp32 after
        `fallback_overflows` skipped updates within `fallback_window` gradient steps, or when
        the dynamic scale would fall below `min_scale`. Both branches are compiled up front (a
        second, fp32 network), and every act and update then holds a `cond` on the shared
        flag, which a GPU reads on the host at every step: the switch costs no recompilation,
        the branch costs every step.
      initial_scale: the dynamic loss scale's starting value.
      growth_interval: finite steps in a row after which the dynamic scale doubles.
      min_scale: the dynamic scale's floor (it is halved on overflow, never below this).
      fallback_overflows: skipped updates within a window that trigger the fallback.
      fallback_window: gradient steps per overflow-counting window.
    """

    compute: str = knob("auto", alias="--precision")
    loss_scale: str = knob("auto", alias="--loss-scale")
    matmul_precision: str = knob("default", alias="--matmul-precision")
    fallback: bool = False
    initial_scale: float = knob(2.0**15, sweep=True)
    growth_interval: int = knob(2000, sweep=True)
    min_scale: float = knob(1.0, sweep=True)
    fallback_overflows: int = knob(32, sweep=True)
    fallback_window: int = knob(1000, sweep=True)

    def __post_init__(self) -> None:
        require(self, "compute", self.compute in _COMPUTE, f"one of {_COMPUTE}")
        require(
            self,
            "loss_scale",
            self.static_scale is not None or self.loss_scale in ("auto", "dynamic", "none"),
            "'auto', 'dynamic', 'none' or 'static:<value>' with a value > 0, e.g. 'static:1024'",
        )
        require(self, "matmul_precision", self.matmul_precision in _MATMUL, f"one of {_MATMUL}")
        require(self, "fallback", isinstance(self.fallback, bool), "True or False")
        require(
            self,
            "initial_scale",
            is_num(self.initial_scale) and self.initial_scale >= 1,
            "a float >= 1, e.g. 32768.0",
        )
        require(
            self,
            "min_scale",
            is_num(self.min_scale) and 0 < self.min_scale <= self.initial_scale,
            f"a float in (0, initial_scale={self.initial_scale}]",
        )
        for name in ("growth_interval", "fallback_overflows", "fallback_window"):
            value = getattr(self, name)
            require(self, name, is_int(value) and value > 0, "a positive int")

    @property
    def static_scale(self) -> float | None:
        """The value of a "static:<value>" loss scale, else None."""
        text = self.loss_scale
        if not isinstance(text, str) or not text.startswith("static:"):
            return None
        try:
            value = float(text[len("static:") :])
        except ValueError:
            return None
        return value if math.isfinite(value) and value > 0 else None
