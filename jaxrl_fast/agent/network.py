"""The Q-network (flax.linen): a torso, an optional LSTM core, a value head.

`QNetwork` composes the agent's network parts (`agent.torsos`: MLP, MinAtar CNN, Nature CNN,
LSTM; `agent.heads`: scalar, dueling, or a registered head) inside one compact module, so the
parameter tree is one flat set of layers whatever the parts.

Hidden layers use He-normal init; the output layer a small normal (std 0.01) init, so initial
Q-values are near zero. `dtype` is the compute dtype, `param_dtype` the storage dtype (fp32
master weights); inputs are cast once, at the network input (uint8 frames are also scaled to
[0, 1] there), and the output is returned in fp32. `precision` is passed to every matmul and
convolution.
"""

from __future__ import annotations

from typing import Any, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxrl_fast.agent import dense as _dense
from jaxrl_fast.agent import heads as _heads
from jaxrl_fast.agent import torsos
from jaxrl_fast.agent.layers import Conv, hidden_init, orthogonal_init
from jaxrl_fast.config import NetworkConfig, TrainConfig
from jaxrl_fast.config.sections import AlgoConfig
from jaxrl_fast.envs.base import EnvSpec
from jaxrl_fast.types import Array

__all__ = ["Conv", "QNetwork", "network_sections", "orthogonal_init"]


class QNetwork(nn.Module):
    """Maps observations `[B, *obs_shape]` to Q-values `[B, num_actions]` (float32), or to the
    output of its value head (`value_head.q_values` of it are the Q-values).

    `role` names the pass for a head that samples (IQN: "online", "target", "select" or "act"
    take N, N', K and K quantile levels); other heads ignore it.

    With `lstm > 0` it is recurrent: `(obs [B, *obs_shape], carry [B, 2, lstm]) -> (q, carry)`,
    an LSTM between the torso (conv and `hidden_sizes` layers) and the head; the carry holds
    the LSTM's cell and hidden state (in that order, float32), zeros at an episode's start
    (`initial_carry`).

    Attributes:
      num_actions: size of the discrete action space.
      hidden_sizes: dense hidden widths.
      conv_channels: 3x3 stride-1 conv channels; empty for an MLP.
      nature: use the Nature-DQN conv torso (`conv_channels` is then ignored).
      conv_impl: the Nature torso's `Conv.impl`.
      dueling: value + advantage head (the same as `head="dueling"`).
      head: the value head's name (`agent.heads`): "scalar", "dueling", a distributional head
        ("c51", "qr-dqn", "hl-gauss") or a registered one.
      head_settings: the settings of a head that has them (its `TrainConfig.algo` section's
        config, e.g. `DistributionalConfig`; None: that section's defaults).
      dense_layer: the kind of every dense layer (`agent.dense`): "dense" or "noisy".
      dense_settings: the settings of a dense kind that has them (its section's config, e.g.
        `NoisyConfig`; None: the defaults).
      lstm: LSTM width (0: a feed-forward network).
      layer_norm: a LayerNorm before every hidden ReLU of the torso (PQN's networks).
      dtype: compute dtype.
      param_dtype: parameter dtype.
      precision: `jax.lax.Precision` for matmuls and convolutions (None: backend default).
    """

    num_actions: int
    hidden_sizes: Sequence[int] = (120, 84)
    conv_channels: Sequence[int] = ()
    nature: bool = False
    conv_impl: str = "auto"
    dueling: bool = False
    head: str = "scalar"
    head_settings: Any = None
    dense_layer: str = "dense"
    dense_settings: Any = None
    lstm: int = 0
    layer_norm: bool = False
    dtype: Any = jnp.float32
    param_dtype: Any = jnp.float32
    precision: Any = None

    def initial_carry(self, batch: int) -> Array:
        """The recurrent state at an episode's start: `[batch, 2, lstm]` float32 zeros."""
        return jnp.zeros((batch, 2, self.lstm), jnp.float32)

    @nn.compact
    def __call__(
        self, obs: Array, carry: Array | None = None, role: str = "act"
    ) -> Array | tuple[Array, Array]:
        if (carry is None) != (self.lstm == 0):
            raise ValueError(
                f"QNetwork(lstm={self.lstm}) takes "
                + ("a carry [B, 2, lstm]" if self.lstm else "no carry")
                + f"; got carry={None if carry is None else carry.shape}."
            )
        x = obs.astype(self.dtype)
        if obs.dtype == jnp.uint8:
            x = x * jnp.asarray(1.0 / 255.0, self.dtype)
        make = _dense.get(self.dense_layer).make
        dense = lambda n, init=hidden_init: make(  # noqa: E731
            n,
            init,
            dtype=self.dtype,
            param_dtype=self.param_dtype,
            precision=self.precision,
            settings=self.dense_settings,
        )
        x = torsos.TORSOS[self.torso](self, x, dense)
        if self.lstm:
            x, carry = torsos.lstm_core(self, x, carry)
        head = self.value_head
        if head.streams:  # a sampling head: its key (None without the stream) and the pass
            (stream,) = head.streams
            rng = self.make_rng(stream) if self.has_rng(stream) else None
            out = head.apply(x, self.num_actions, dense, rng=rng, role=role)
        else:
            out = head.apply(x, self.num_actions, dense)
        out = jax.tree.map(lambda y: y.astype(jnp.float32), out)
        return (out, carry) if self.lstm else out

    @property
    def rng_streams(self) -> tuple[str, ...]:
        """The flax random streams its layers and head draw from (`agent.dense`, a sampling
        head's `streams`; () for none)."""
        return _dense.get(self.dense_layer).streams + self.value_head.streams

    @property
    def torso(self) -> str:
        """The torso's name (`torsos.TORSOS`)."""
        return "nature" if self.nature else "cnn" if self.conv_channels else "mlp"

    @property
    def value_head(self) -> _heads.ValueHead:
        """The value head (`heads.get(head)` built for `head_settings`; `dueling=True` is the
        "dueling" head, or the dueling form of a configurable head)."""
        head = _heads.get(self.head)
        if head.configure is not None:
            return head.built(self.head_settings, self.dueling)
        return _heads.DUELING if self.dueling else head

    @classmethod
    def from_config(
        cls, config: NetworkConfig, spec: EnvSpec, algo: AlgoConfig | None = None, **kwargs: Any
    ) -> QNetwork:
        """Build the network a `NetworkConfig` describes for an env spec, its head's and dense
        layers' settings from their sections of `algo` (`TrainConfig.algo`; None: defaults).
        A run's network is `for_run(config, spec)`: without the run's `algo`, a head with
        settings gets its section's defaults."""
        kind = config.torso(spec.obs_shape)
        if kind in ("cnn", "nature") and len(spec.obs_shape) != 3:
            raise ValueError(
                f"NetworkConfig.kind={kind!r} needs image observations [H, W, C]; env "
                f"{spec.name!r} gives shape {spec.obs_shape}. Use kind='mlp' or 'auto'."
            )
        if kind == "nature" and min(spec.obs_shape[:2]) < 36:
            raise ValueError(
                f"NetworkConfig.kind='nature' needs frames of at least 36x36 (84x84 in DQN); env "
                f"{spec.name!r} gives shape {spec.obs_shape}. Use kind='cnn' for small frames."
            )
        algo = AlgoConfig() if algo is None else algo
        settings = {part: algo[name] for part, name in network_sections(config).items()}
        return cls(
            num_actions=spec.num_actions,
            hidden_sizes=tuple(config.hidden_sizes),
            conv_channels=tuple(config.conv_channels) if kind == "cnn" else (),
            nature=kind == "nature",
            dueling=config.dueling,
            head=config.head or "scalar",
            head_settings=settings.get("head"),
            dense_layer=config.dense,
            dense_settings=settings.get("dense"),
            lstm=config.lstm,
            layer_norm=config.layer_norm,
            **{"conv_impl": config.conv_impl, **kwargs},
        )

    @classmethod
    def for_run(cls, config: TrainConfig, spec: EnvSpec, **kwargs: Any) -> QNetwork:
        """The network of a run's `TrainConfig` (its `network` with its `algo` sections) for an
        env spec, in float32 unless `kwargs` say otherwise."""
        return cls.from_config(config.network, spec, config.algo, **kwargs)

    @classmethod
    def for_precision(
        cls,
        config: NetworkConfig,
        spec: EnvSpec,
        precision: Any,
        algo: AlgoConfig | None = None,
        **kwargs: Any,
    ) -> QNetwork:
        """The network for a `precision.PrecisionPolicy`: its compute dtype, fp32 params, its matmul
        precision; `kwargs` override module attributes (e.g. `conv_impl`)."""
        from jaxrl_fast.agent.precision import COMPUTE_DTYPES

        return cls.from_config(
            config,
            spec,
            algo,
            **{
                "dtype": COMPUTE_DTYPES[precision.compute],
                "param_dtype": jnp.float32,
                "precision": precision.lax_precision,
                **kwargs,
            },
        )


def network_sections(config: NetworkConfig) -> dict[str, str]:
    """The `TrainConfig.algo` sections the network of `config` reads: `{"head": name}` for a
    head with settings, `{"dense": name}` for a dense kind with them (`{}`: none)."""
    head = _heads.get(config.head or "scalar")
    out = {"head": head.section} if head.configure is not None and head.section else {}
    dense = _dense.get(config.dense)
    if dense.section:
        out["dense"] = dense.section
    return out
