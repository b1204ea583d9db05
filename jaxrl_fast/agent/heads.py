"""Value heads: features `[B, F]` to the network's output, and that output to Q-values `[B, A]`.

A head is a `ValueHead(name, apply, q_values)`:

    apply(features [B, F], num_actions, dense) -> output
        called inside `QNetwork`'s compact `__call__`; `dense(n, init)` makes one of the
        network's dense layers (so its parameters are the network's own); `head_init` is the
        small-normal initialiser of output layers (initial Q-values near zero)
    q_values(output) -> [B, A]
        what acting, evaluation, the TD loss and the baseline read (the identity for a head
        whose output is the Q-values; a distributional head's mean)

The library's heads are `scalar` (one linear layer), `dueling` (value + advantage, the
advantage centred) and the distributional heads of `agent.distributional` (`c51`, `qr-dqn`,
`hl-gauss`) and `agent.iqn`. A head with settings declares them as a config section of its
own module (`section`: the name of a `TrainConfig.algo` section, `config.sections`) and has a
`configure(settings, dueling) -> ValueHead` (the head for that section's values); it names the
`loss` its output trains with.
`NetworkConfig.head` names the head; `register(name, head)` makes a new one available under a
name, with no edit anywhere else:

    >>> import jax.numpy as jnp
    >>> from jaxrl_fast.agent import heads
    >>> def twice(features, num_actions, dense):   # a toy head: Q = 2 x a linear layer
    ...     return 2.0 * dense(num_actions, heads.head_init)(features)
    >>> heads.register("doc-twice", heads.ValueHead("doc-twice", twice))
    >>> heads.get("doc-twice").name
    'doc-twice'
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import flax.linen as nn

from jaxrl_fast.config.registry import HEADS
from jaxrl_fast.config.sections import section_class
from jaxrl_fast.types import Array

head_init = nn.initializers.normal(stddev=0.01)


def _identity(x: Any) -> Any:
    return x


class ValueHead(NamedTuple):
    """A value head: `apply(features, num_actions, dense) -> output` and `q_values(output)`;
    for a head with settings, `configure(settings, dueling) -> ValueHead` (None: none) and the
    `section` of `TrainConfig.algo` its settings are (None: none); and the `loss`
    (`DQNConfig.loss`) its output needs (None: any loss over Q-values).

    A head that samples (IQN's quantile levels) names its flax random `streams`; its `apply`
    then also takes `rng=` (a key, or None when the caller passes no stream: evaluation, a saved
    policy; it must then compute deterministically) and `role=` (the pass: "act", "online",
    "target" or "select"; `QNetwork.__call__`'s `role`)."""

    name: str
    apply: Callable[[Array, int, Callable], Any]
    q_values: Callable[[Any], Array] = _identity
    configure: Callable[[Any, bool], ValueHead] | None = None
    loss: str | None = None
    streams: tuple[str, ...] = ()
    section: str | None = None

    def built(self, settings: Any = None, dueling: bool = False) -> ValueHead:
        """The head for `settings` (its section's config; None: the section's defaults) and
        `dueling` (itself when it has no settings)."""
        if self.configure is None:
            return self
        if settings is None and self.section is not None:
            settings = section_class(self.section)()
        return self.configure(settings, dueling)


def unbuilt(name: str) -> Callable:
    """The `apply` of a head with settings before it is built: refuses with how to build it."""

    def apply(*_, **__):
        raise ValueError(f"value head {name!r} has settings: build it with head.built(settings).")

    return apply


def _scalar(features: Array, num_actions: int, dense: Callable) -> Array:
    return dense(num_actions, head_init)(features)


def _dueling(features: Array, num_actions: int, dense: Callable) -> Array:
    value = dense(1, head_init)(features)
    adv = dense(num_actions, head_init)(features)
    return value + adv - adv.mean(axis=-1, keepdims=True)


SCALAR = ValueHead("scalar", _scalar)
DUELING = ValueHead("dueling", _dueling)
for _head in (SCALAR, DUELING):
    HEADS.register(_head.name, _head, builtin=True)
Q_HEADS = ("scalar", "dueling")  # the heads whose output is the Q-values


def register(name: str, head: ValueHead) -> None:
    """Make `head` available as `NetworkConfig(head=name)` in this process.

    Raises:
      ValueError: `name` is empty or a built-in head's, or is taken by another head.
      TypeError: `head` is not a `ValueHead`.
    """
    if not isinstance(head, ValueHead):
        raise TypeError(f"register({name!r}, ...): expected a heads.ValueHead, got {type(head)}.")
    HEADS.register(name, head)


names = HEADS.names
get = HEADS.get
