"""How much memory there is: byte sizes in words (`parse_bytes`), the host's free memory and a
device's (`available_memory`). Byte units follow SI for kB/MB/GB/TB (powers of 1000) and IEC for
KiB/MiB/GiB/TiB (powers of 1024)."""

from __future__ import annotations

import math
import os
import re
from typing import Any

__all__ = ["available_memory", "host_available_memory", "parse_bytes"]

# kB, MB, GB, TB are powers of 1000; KiB, MiB, GiB, TiB powers of 1024 (case-insensitive).
_UNITS = {"": 1, "b": 1} | {u + "b": 1000**i for i, u in enumerate("kmgt", 1)}
_UNITS |= {u + "ib": 1024**i for i, u in enumerate("kmgt", 1)}
_SIZE = re.compile(r"^\s*((?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?)\s*([a-z]*)\s*$", re.IGNORECASE)


def parse_bytes(size: str | int) -> int:
    """Parse a byte size such as "16GB", "16GiB", "512MB", "1e9" or an int.

    Args:
      size: a positive number with an optional unit: B, kB, MB, GB, TB (powers of 1000) or
        KiB, MiB, GiB, TiB (powers of 1024), case-insensitive.

    Returns:
      The size in bytes (rounded down).

    Raises:
      ValueError: not a positive size with a known unit.

    Examples:
      >>> parse_bytes("16GB"), parse_bytes("16GiB"), parse_bytes("1e9"), parse_bytes("512 MB")
      (16000000000, 17179869184, 1000000000, 512000000)
    """
    allowed = (
        "a positive number with an optional unit, e.g. 16GB, 16GiB, 512MB or 1e9 (kB/MB/GB/TB "
        "are powers of 1000, KiB/MiB/GiB/TiB powers of 1024)"
    )
    if isinstance(size, int) and not isinstance(size, bool):
        if size > 0:
            return size
        raise ValueError(f"byte size {size!r} is not allowed; expected {allowed}.")
    match = _SIZE.match(size) if isinstance(size, str) else None
    unit = match.group(2).lower() if match else None
    if match is None or unit not in _UNITS:
        raise ValueError(f"byte size {size!r} is not allowed; expected {allowed}.")
    value = float(match.group(1)) * _UNITS[unit]
    if not (math.isfinite(value) and value >= 1):
        raise ValueError(f"byte size {size!r} is not allowed; expected {allowed}.")
    return int(value)


def host_available_memory() -> int:
    """Host RAM available to a new allocation: `MemAvailable` of /proc/meminfo, in bytes.

    Falls back to free physical pages (`os.sysconf`) where /proc/meminfo is missing.
    """
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024  # the file counts kB (KiB)
    except (OSError, ValueError, IndexError):  # no readable /proc/meminfo: the fallback below
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def available_memory(device: Any = None) -> tuple[int, str]:
    """Free memory of `device` in bytes and where the number came from.

    A GPU or TPU reports `bytes_limit - bytes_in_use` through `device.memory_stats()`; a CPU
    device uses host RAM (`host_available_memory`).

    Args:
      device: a `jax.Device`; None means `jax.devices()[0]`.

    Returns:
      `(bytes, source)`, e.g. `(15_000_000_000, "cuda:0 memory_stats")`.

    Raises:
      ValueError: an accelerator without memory statistics.
    """
    if device is None:
        import jax

        device = jax.devices()[0]
    if getattr(device, "platform", "cpu") == "cpu":
        return host_available_memory(), "host RAM (MemAvailable)"
    stats = device.memory_stats()
    if not stats or "bytes_limit" not in stats:
        raise ValueError(
            f"cannot read the free memory of {device} (memory_stats() has no bytes_limit); set "
            f"ReplayConfig.capacity to a number of rows, or give device_memory explicitly."
        )
    return int(stats["bytes_limit"]) - int(stats.get("bytes_in_use", 0)), f"{device} memory_stats"
