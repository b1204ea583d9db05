"""Mixed precision (docs/mixed-precision.md): compute-dtype policy, loss scaling, fallback to fp32.

Parameters, optimiser state and the update stay fp32 ("master weights"); only the network's
forward and backward passes run in the policy's compute dtype, and Q-values and the loss are
fp32. The pieces:

- `resolve_precision(config, device)` turns a `PrecisionConfig` into a `PrecisionPolicy`,
  choosing the compute dtype per device for `compute="auto"`.
- `make_loss_scale(precision)` gives the loss scale's pure functions over a `LossScaleState` that
  lives in the agent state: scale the loss, unscale the gradients in fp32, and `adjust` after
  each step (halve on overflow, double after `growth_interval` finite steps, count overflows
  and raise the fallback flag).
- `skip_nonfinite(tx)` wraps an optax transformation so that a step with non-finite gradients
  leaves the optimiser state as it was and returns updates that leave the parameters bitwise
  unchanged; the loop needs no special case.
- `shared_fallback(scales)` and `record_fallback(scales, flag)`: the one fp32-fallback flag that
  all seeds of a program share (a per-seed flag under the seed vmap would run both branches).

Examples:
  >>> import jax.numpy as jnp
  >>> from jaxrl_fast.config import PrecisionConfig
  >>> precision = resolve_precision(PrecisionConfig(compute="fp16"))
  >>> precision.compute, precision.loss_scale
  ('fp16', 'dynamic')
  >>> scale = make_loss_scale(precision)
  >>> state = scale.init()
  >>> float(state.scale)
  32768.0
  >>> float(scale.adjust(state, jnp.bool_(False)).scale)  # an overflow halves it
  16384.0
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import optax

from jaxrl_fast.agent.device_precision import (  # noqa: F401  (re-exported: `precision.auto_compute`)
    BF16_FROM_COMPUTE_CAPABILITY,
    LOW_PRECISION_TORSOS,
    TENSOR_CORES_FROM_COMPUTE_CAPABILITY,
    auto_compute,
    matmul_arithmetic,
)
from jaxrl_fast.config import PrecisionConfig
from jaxrl_fast.types import Array

COMPUTE_DTYPES = {"fp32": jnp.float32, "bf16": jnp.bfloat16, "fp16": jnp.float16}
_MATMUL = {
    "default": None,
    "high": jax.lax.Precision.HIGH,
    "highest": jax.lax.Precision.HIGHEST,
}


@dataclasses.dataclass(frozen=True)
class PrecisionPolicy:
    """A resolved precision policy.

    Attributes:
      compute: "fp32", "bf16" or "fp16": the network's compute dtype.
      loss_scale: "dynamic", "static" or "none".
      scale: the starting (dynamic) or fixed (static) loss scale; 1.0 for "none".
      matmul_precision: "default", "high" or "highest".
      fallback: whether the run may switch its compute to fp32 (never for fp32 compute).
      growth_interval, min_scale, fallback_overflows, fallback_window: see `PrecisionConfig`.
      reason: why this policy was chosen (the device, for "auto").
      matmuls: what the matmuls and convolutions compute in on the device ("TF32" where fp32
        inputs run as TF32: `matmul_arithmetic`).
    """

    compute: str = "fp32"
    loss_scale: str = "none"
    scale: float = 1.0
    matmul_precision: str = "default"
    fallback: bool = False
    growth_interval: int = 2000
    min_scale: float = 1.0
    fallback_overflows: int = 32
    fallback_window: int = 1000
    reason: str = "set in the config"
    matmuls: str = "fp32"

    @property
    def compute_dtype(self) -> Any:
        """The jnp dtype networks compute in."""
        return COMPUTE_DTYPES[self.compute]

    @property
    def skip_nonfinite(self) -> bool:
        """Whether updates with non-finite gradients are skipped (any scale or low precision)."""
        return self.compute != "fp32" or self.loss_scale != "none"

    @property
    def lax_precision(self) -> jax.lax.Precision | None:
        """The `precision=` to give matmuls and convolutions (None: the backend default)."""
        return _MATMUL[self.matmul_precision]

    def describe(self) -> str:
        """One line for the start of a run, e.g. 'compute bf16 (params fp32), loss scale none'."""
        if self.loss_scale == "dynamic":
            scale = f"dynamic loss scale from {self.scale:g}"
        elif self.loss_scale == "static":
            scale = f"static loss scale {self.scale:g}"
        else:
            scale = "no loss scale"
        matmuls = f"matmuls {self.matmuls}"
        if self.matmuls != self.compute:
            precision = self.matmul_precision
            matmuls += f" (matmul precision {precision!r}; 'highest' for {self.compute})"
        parts = [f"compute {self.compute} (params fp32)", matmuls, scale]
        if self.skip_nonfinite:
            parts.append("non-finite updates skipped")
        if self.fallback:
            parts.append(
                f"fp32 fallback after {self.fallback_overflows} overflows in "
                f"{self.fallback_window} steps"
                + (f" or a scale below {self.min_scale:g}" if self.loss_scale == "dynamic" else "")
            )
        return "precision: " + ", ".join(parts) + f" [{self.reason}]"


def resolve_precision(
    config: PrecisionConfig, device: Any | None = None, torso: str = "mlp"
) -> PrecisionPolicy:
    """Resolve a `PrecisionConfig` for a network with `torso` on `device` (default: the first
    local device).

    `compute="auto"` is chosen by `auto_compute`; `loss_scale="auto"` is dynamic for fp16 and none
    otherwise. The fallback applies only to low-precision compute.
    """
    device = device if device is not None else jax.local_devices()[0]
    compute, reason = config.compute, "set in the config"
    if compute == "auto":
        compute, reason = auto_compute(device, torso)
    kind = config.loss_scale
    if kind == "auto":
        kind = "dynamic" if compute == "fp16" else "none"
    scale = 1.0
    if config.static_scale is not None:
        kind, scale = "static", config.static_scale
    elif kind == "dynamic":
        scale = float(config.initial_scale)
    return PrecisionPolicy(
        compute=compute,
        loss_scale=kind,
        scale=scale,
        matmul_precision=config.matmul_precision,
        fallback=config.fallback and compute != "fp32",
        growth_interval=config.growth_interval,
        min_scale=float(config.min_scale),
        fallback_overflows=config.fallback_overflows,
        fallback_window=config.fallback_window,
        reason=reason,
        matmuls=matmul_arithmetic(compute, config.matmul_precision, device),
    )


class LossScaleState(NamedTuple):
    """The loss scale's state (all scalars; one per seed inside the agent state).

    Attributes:
      scale: `[]` float32 current loss scale.
      good_steps: `[]` int32 finite steps since the scale last changed.
      overflows: `[]` int32 skipped steps in the current window.
      window_steps: `[]` int32 steps into the current window.
      skipped: `[]` int32 skipped steps in the whole run.
      fallback: `[]` bool, the compute has switched to fp32.
    """

    scale: Array
    good_steps: Array
    overflows: Array
    window_steps: Array
    skipped: Array
    fallback: Array


class LossScale(NamedTuple):
    """Pure functions over a `LossScaleState`, built by `make_loss_scale`."""

    init: Callable[..., LossScaleState]
    scale: Callable[[Array, LossScaleState], Array]
    unscale: Callable[[Any, LossScaleState], Any]
    adjust: Callable[..., LossScaleState]


def make_loss_scale(precision: PrecisionPolicy) -> LossScale:
    """Build the loss-scale functions for `precision`.

    `init(knobs=None)` and `adjust(state, finite, knobs=None)`: `knobs` (traced, an `HParams`)
    gives `initial_scale`, `growth_interval`, `min_scale`, `fallback_overflows` and
    `fallback_window` instead of the policy's (`PrecisionConfig`); a static scale stays the
    policy's.

    `adjust(state, finite)` after a step:
      - finite: `good_steps + 1`; once it reaches `growth_interval` a dynamic scale doubles and
        `good_steps` restarts at 0.
      - not finite: the step was skipped; `skipped` and `overflows` count it, a dynamic scale
        halves (never below `min_scale`) and `good_steps` restarts at 0.
      - the fallback flag rises (and stays) when `overflows` reaches `fallback_overflows`
        within one window of `fallback_window` steps, or when a dynamic scale would fall below
        `min_scale`, if the policy allows a fallback.
    """
    dynamic = precision.loss_scale == "dynamic"

    def init(knobs: Any = None) -> LossScaleState:
        zero = jnp.zeros((), jnp.int32)
        start = knobs.initial_scale if (knobs is not None and dynamic) else precision.scale
        return LossScaleState(
            scale=jnp.asarray(start, jnp.float32),
            good_steps=zero,
            overflows=zero,
            window_steps=zero,
            skipped=zero,
            fallback=jnp.zeros((), bool),
        )

    def scale(loss: Array, state: LossScaleState) -> Array:
        if precision.loss_scale == "none":
            return loss
        return loss * state.scale.astype(loss.dtype)

    def unscale(grads: Any, state: LossScaleState) -> Any:
        if precision.loss_scale == "none":
            return grads
        inv = 1.0 / state.scale
        return jax.tree.map(lambda g: (g.astype(jnp.float32) * inv).astype(g.dtype), grads)

    def adjust(state: LossScaleState, finite: Array, knobs: Any = None) -> LossScaleState:
        p = precision if knobs is None else knobs
        overflow = jnp.logical_not(finite)
        good = state.good_steps + 1
        scale, below_floor = state.scale, jnp.zeros((), bool)
        if dynamic:
            grow = jnp.logical_and(finite, good >= p.growth_interval)
            halved = state.scale * 0.5
            below_floor = jnp.logical_and(overflow, halved < p.min_scale)
            scale = jnp.where(
                finite,
                jnp.where(grow, state.scale * 2.0, state.scale),
                jnp.maximum(halved, p.min_scale),
            )
            good = jnp.where(jnp.logical_or(grow, overflow), 0, good)
        else:
            good = jnp.where(overflow, 0, good)
        overflows = state.overflows + overflow.astype(jnp.int32)
        trigger = jnp.logical_or(overflows >= p.fallback_overflows, below_floor)
        window_steps = state.window_steps + 1
        new_window = window_steps >= p.fallback_window
        return LossScaleState(
            scale=scale.astype(jnp.float32),
            good_steps=good.astype(jnp.int32),
            overflows=jnp.where(new_window, 0, overflows).astype(jnp.int32),
            window_steps=jnp.where(new_window, 0, window_steps).astype(jnp.int32),
            skipped=state.skipped + overflow.astype(jnp.int32),
            fallback=jnp.logical_or(state.fallback, jnp.logical_and(precision.fallback, trigger)),
        )

    return LossScale(init=init, scale=scale, unscale=unscale, adjust=adjust)


def fallback_cond(fp32: Array, full: Callable, lowp: Callable, *args: Any) -> Any:
    """`full(*args)` once the shared fp32-fallback flag is up, else `lowp(*args)`: a real branch
    (the flag is shared by the seeds), named `fp32_fallback` in the compiled program."""
    with jax.named_scope("fp32_fallback"):  # opt-in: PrecisionConfig.fallback
        return jax.lax.cond(fp32, full, lowp, *args)


def shared_fallback(scales: LossScaleState) -> Array:
    """`[]` bool: the program computes in fp32, because any of its seeds fell back.

    Seeds in one program switch together: a flag shared by all seeds keeps the switch a real
    branch under the seed vmap, where a per-seed flag would run both branches.

    Args:
      scales: the seeds' `LossScaleState`s, leaves `[S]`.
    """
    return jnp.any(scales.fallback)


def record_fallback(scales: LossScaleState, flag: Array) -> LossScaleState:
    """Write the shared fallback `flag` (`[]` bool) into every seed's `LossScaleState` (`[S]`)."""
    return scales._replace(fallback=jnp.broadcast_to(flag, scales.fallback.shape))


def all_finite(tree: Any) -> Array:
    """`[]` bool: every element of every leaf is finite."""
    leaves = [jnp.all(jnp.isfinite(x)) for x in jax.tree.leaves(tree)]
    return jnp.all(jnp.stack(leaves)) if leaves else jnp.ones((), bool)


def skip_nonfinite(
    inner: optax.GradientTransformation,
    everywhere: Callable[[Array], Array] | None = None,
) -> optax.GradientTransformationExtraArgs:
    """Wrap `inner` so that a step with non-finite gradients changes nothing.

    On such a step the returned optimiser state is the old one, leaf for leaf, and every update
    is `-0.0`: `x + (-0.0) == x` bitwise for every float `x` (both zeros included), so
    `optax.apply_updates` leaves the parameters bitwise unchanged. Unlike
    `optax.apply_if_finite` there is no extra state and no limit on consecutive skips: the loss
    scale (`make_loss_scale`) counts them and decides on the fallback. `everywhere` turns the
    local "finite" into one shared by data replicas (`parallel.Exchange.all`), so they all skip
    together; extra arguments of `update` (e.g. 1-bit Adam's `step`) go to `inner`.
    """
    inner = optax.with_extra_args_support(inner)

    def init(params: Any) -> Any:
        return inner.init(params)

    def update(grads: Any, state: Any, params: Any = None, **extra: Any) -> tuple[Any, Any]:
        finite = all_finite(grads)
        if everywhere is not None:
            finite = everywhere(finite)
        updates, new_state = inner.update(grads, state, params, **extra)
        updates = jax.tree.map(lambda u: jnp.where(finite, u, jnp.asarray(-0.0, u.dtype)), updates)
        new_state = jax.tree.map(lambda new, old: jnp.where(finite, new, old), new_state, state)
        return updates, new_state

    return optax.GradientTransformationExtraArgs(init, update)


def scaled_value_and_grad(
    fn: Callable[..., tuple[Array, Any]], loss_scale: LossScale
) -> Callable[..., tuple[tuple[Array, Any], Any]]:
    """`jax.value_and_grad(fn, has_aux=True)` with the loss scaled and the gradients unscaled.

    Args:
      fn: `fn(params, *args) -> (loss, aux)` with a float32 scalar loss.
      loss_scale: from `make_loss_scale`.

    Returns:
      `grad_fn(state, params, *args) -> ((loss, aux), grads)`: the unscaled loss and gradients
      (fp32 for fp32 parameters), `state` the `LossScaleState`.
    """

    def scaled(params, state, *args):
        loss, aux = fn(params, *args)
        return loss_scale.scale(loss, state), (loss, aux)

    grad = jax.grad(scaled, has_aux=True)

    def grad_fn(state: LossScaleState, params: Any, *args: Any):
        grads, (loss, aux) = grad(params, state, *args)
        return (loss, aux), loss_scale.unscale(grads, state)

    return grad_fn
