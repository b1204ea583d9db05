"""Replay: L1 staging, L2 device ring (uniform or prioritised), L3 host/NVMe store, composed as
one `Buffer` by `make_buffer` (docs/replay-tiers.md). Stored-row fields and bytes:
`replay.layout`."""

from __future__ import annotations

from jaxrl_fast.replay.base import HOST_STATE_ITEM, Buffer
from jaxrl_fast.replay.l3 import L3, L3Layout, make_l3, plan_l3
from jaxrl_fast.replay.layout import row_bytes
from jaxrl_fast.replay.ring import RingState, StoredRow, make_ring
from jaxrl_fast.replay.tiered import ReplayState, make_buffer

__all__ = [
    "HOST_STATE_ITEM",
    "L3",
    "Buffer",
    "L3Layout",
    "ReplayState",
    "RingState",
    "StoredRow",
    "make_buffer",
    "make_l3",
    "make_ring",
    "plan_l3",
    "row_bytes",
]
