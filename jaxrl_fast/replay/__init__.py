"""Replay buffers as pure functions over state pytrees."""

from __future__ import annotations

from jaxrl_fast.config import ReplayConfig
from jaxrl_fast.replay.base import Buffer
from jaxrl_fast.replay.ring import RingState, make_ring_buffer
from jaxrl_fast.types import Transition

__all__ = ["Buffer", "RingState", "make_buffer", "make_ring_buffer"]


def make_buffer(config: ReplayConfig, example: Transition) -> Buffer:
    """Build the replay buffer a `ReplayConfig` describes.

    Args:
      config: replay settings.
      example: a `Transition` with leading `[num_envs]` axis giving shapes and dtypes.
    """
    return make_ring_buffer(config, example)
