"""Replay: L1 staging, L2 device ring (uniform or prioritised), L3 host/NVMe store, composed as
one `Buffer` by `make_buffer` (DESIGN §4)."""

from __future__ import annotations

from jaxrl_fast.replay.base import Buffer
from jaxrl_fast.replay.ring import RingState, StoredRow, make_ring, row_bytes
from jaxrl_fast.replay.tiered import L3Layout, ReplayState, make_buffer, plan_l3

__all__ = [
    "Buffer",
    "L3Layout",
    "ReplayState",
    "RingState",
    "StoredRow",
    "make_buffer",
    "make_ring",
    "plan_l3",
    "row_bytes",
]
