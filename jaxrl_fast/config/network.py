"""Q-network settings: torso, value head, LSTM (a head's or dense kind's own settings are its
config section, `TrainConfig.algo`)."""

from __future__ import annotations

import dataclasses

from jaxrl_fast.config.fields import config_class, is_int, require
from jaxrl_fast.config.registry import DENSE_LAYERS, HEADS

_NETWORKS = ("auto", "mlp", "cnn", "nature")

_CONV_IMPLS = ("auto", "conv", "patches", "conv_patches_grad", "conv_canonical_grads")


@config_class
@dataclasses.dataclass(frozen=True, kw_only=True)
class NetworkConfig:
    """Q-network settings.

    Attributes:
      kind: "mlp", "cnn" (MinAtar-sized conv torso), "nature" (the Nature-DQN torso for
        84x84 frames: convs 8x8/4 32, 4x4/2 64, 3x3/1 64, then `hidden_sizes`, e.g. (512,)) or
        "auto" (cnn for image observations).
      hidden_sizes: widths of the MLP hidden layers (or of the dense layers after the conv).
      conv_channels: channels of the CNN's 3x3 conv layers (stride 1).
      dueling: use a dueling value/advantage head (the same as `head="dueling"`; with a
        distributional head, its dueling form, as Rainbow's).
      head: None (the scalar head, or the dueling head with `dueling`), or the name of a value
        head: "scalar", "dueling", the distributional heads "c51" (categorical over fixed
        atoms), "qr-dqn" (quantiles) and "hl-gauss" (a histogram trained on a
        Gaussian-smoothed target), whose settings are `TrainConfig.algo.distributional`, and
        "iqn" (implicit quantiles; `TrainConfig.algo.iqn`), each trained by the
        `DQNConfig.loss` of its name (docs/distributional.md), or one added with
        `jaxrl_fast.agent.heads.register`.
      dense: the kind of every dense layer (the torso's and the head's): "dense", or "noisy"
        (factorised Gaussian noisy layers, Fortunato et al. 2018: the exploration of Rainbow;
        noise drawn per act and per update from each seed's keys, none at evaluation; its
        initial scale is `TrainConfig.algo.noisy.sigma0`; set the epsilon schedule to 0 with it,
        as the presets do; docs/dqn_family.md), or one added with
        `jaxrl_fast.agent.dense.register`.
      conv_impl: how the Nature torso's strided convolutions compute: "conv", "patches"
        (patches x matmul), "conv_patches_grad" (convolutions, but the kernel gradient as
        patches x matmul), "conv_canonical_grads" (convolutions whose gradients are written
        as NHWC x HWIO convolutions too: XLA:CPU rewrites convolutions into that fast form only
        outside loops, and ran autodiff's gradient convolutions ~8x slower inside the fused
        loop) or "auto" (on CPU conv_canonical_grads, or patches when several seeds are
        vmapped, whose batched (grouped) convolutions XLA:CPU runs slowly; conv elsewhere; the
        conventional baseline, which calls each update on its own, uses conv). Same function,
        same parameters (`networks.Conv`).
      lstm: 0 (a feed-forward Q-network), or the width of an LSTM between the torso and the
        head: a recurrent Q-network whose state is carried through acting and reset at episode
        starts, trained on stored sequences (`ReplayConfig.sequence_length`, `burn_in`).
      layer_norm: a LayerNorm between every hidden layer (convolutions and dense layers of the
        torso) and its ReLU, as PQN's networks (Gallici et al. 2024): what keeps its Q-learning
        without a target network stable.
    """

    kind: str = "auto"
    hidden_sizes: tuple[int, ...] = (120, 84)
    conv_channels: tuple[int, ...] = (16,)
    dueling: bool = False
    head: str | None = None
    dense: str = "dense"
    conv_impl: str = "auto"
    lstm: int = 0
    layer_norm: bool = False

    def torso(self, obs_shape: tuple[int, ...]) -> str:
        """The torso `kind` gives for observations of `obs_shape` ("auto": "cnn" for image
        observations [H, W, C], else "mlp")."""
        if self.kind != "auto":
            return self.kind
        return "cnn" if len(obs_shape) == 3 else "mlp"

    def __post_init__(self) -> None:
        require(self, "kind", self.kind in _NETWORKS, f"one of {_NETWORKS}")
        require(self, "conv_impl", self.conv_impl in _CONV_IMPLS, f"one of {_CONV_IMPLS}")
        require(
            self,
            "hidden_sizes",
            isinstance(self.hidden_sizes, tuple)
            and all(is_int(h) and h > 0 for h in self.hidden_sizes),
            "a tuple of positive ints, e.g. (120, 84)",
        )
        require(
            self,
            "conv_channels",
            isinstance(self.conv_channels, tuple)
            and len(self.conv_channels) > 0
            and all(is_int(c) and c > 0 for c in self.conv_channels),
            "a non-empty tuple of positive ints, e.g. (16,)",
        )
        require(self, "dueling", isinstance(self.dueling, bool), "True or False")
        require(self, "head", self.head is None or self.head in HEADS, f"None or {HEADS.allowed()}")
        require(self, "dense", self.dense in DENSE_LAYERS, DENSE_LAYERS.allowed())
        require(self, "layer_norm", isinstance(self.layer_norm, bool), "True or False")
        configurable = getattr(HEADS.find(self.head or ""), "configure", None) is not None
        if self.dueling and self.head not in (None, "dueling") and not configurable:
            raise ValueError(
                f"NetworkConfig.dueling=True and head={self.head!r} name two heads; set one "
                f"(dueling=True is head='dueling')."
            )
        require(
            self,
            "lstm",
            is_int(self.lstm) and 0 <= self.lstm <= 4096,
            "0 (no LSTM) or an LSTM width in [1, 4096], e.g. 64",
        )
