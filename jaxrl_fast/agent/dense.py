"""Dense layer kinds: what every dense layer of the Q-network (the torso's and the head's) is.

A kind is a `DenseKind(name, make, streams, explores, section)`:

    make(features, init, *, dtype, param_dtype, precision, settings) -> a flax module
        one dense layer of `features` outputs; `init` is the kernel initialiser the torso or
        head asks for (He-normal hidden layers, a small normal for output layers); `settings`
        the kind's config section (None for a kind without one)
    streams: the flax random streams its layers draw from ("noise"); the agent passes each a
        key per act and per update (`AgentState.rng`) and none at evaluation, where a layer
        must compute its deterministic (mean) function
    explores: its noise explores, so epsilon-greedy on top is usually turned off
    section: the `TrainConfig.algo` section (`config.sections`) that holds the kind's
        settings, declared in its own module (None: no settings)

`NetworkConfig.dense` names the kind: "dense" (`flax.linen.Dense`) or "noisy"
(`agent.noisy`); `register(name, kind)` adds one with no edit anywhere else.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import flax.linen as nn
import jax

from jaxrl_fast.config.registry import DENSE_LAYERS


class DenseKind(NamedTuple):
    """A kind of dense layer (module docstring)."""

    name: str
    make: Callable[..., nn.Module]
    streams: tuple[str, ...] = ()
    explores: bool = False
    section: str | None = None


def _linear(features, init, *, dtype, param_dtype, precision, settings):
    del settings
    return nn.Dense(
        features, kernel_init=init, dtype=dtype, param_dtype=param_dtype, precision=precision
    )


DENSE = DenseKind("dense", _linear)
DENSE_LAYERS.register("dense", DENSE, builtin=True)


def register(name: str, kind: DenseKind) -> None:
    """Make `kind` available as `NetworkConfig(dense=name)` in this process.

    Raises:
      ValueError: `name` is empty or a built-in kind's, or is taken by another kind.
      TypeError: `kind` is not a `DenseKind`.
    """
    if not isinstance(kind, DenseKind):
        raise TypeError(f"register({name!r}, ...): expected a dense.DenseKind, got {type(kind)}.")
    DENSE_LAYERS.register(name, kind)


def rngs(streams: tuple[str, ...], key) -> dict | None:
    """The `rngs` of a network's `apply` for its `streams` from one key (None: no draws)."""
    if key is None or not streams:
        return None
    keys = jax.random.split(key, len(streams)) if len(streams) > 1 else [key]
    return dict(zip(streams, keys, strict=True))


get = DENSE_LAYERS.get
names = DENSE_LAYERS.names
