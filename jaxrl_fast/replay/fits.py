"""Refuse, before anything is allocated or compiled, a replay that cannot fit (`check_fits`):
the device tiers (L1, L2, the L3 prefetch) in the device's free memory, a host L3 in free host
RAM, a disk L3 in its spill directory's free space. The bytes come from `sizing.plan`; each
refusal is one line naming the fields, the bytes needed and free, and values that fit.
"""

from __future__ import annotations

from typing import Any

from jaxrl_fast.config import TrainConfig
from jaxrl_fast.replay.memory import available_memory, host_available_memory
from jaxrl_fast.replay.sizing import Plan, obs_spec, plan, rows_for_share
from jaxrl_fast.replay.spill_dirs import find_stale_spill_dirs
from jaxrl_fast.replay.spill_dirs import format_bytes as _fmt


def check_fits(
    config: TrainConfig,
    *,
    device: Any = None,
    device_memory: int | None = None,
    host_memory: int | None = None,
    spec: Any = None,
    seed_devices: int = 1,
) -> Plan:
    """Raise a `ValueError` when the replay of `config` cannot fit; else return its `Plan`.

    Only impossible sizes are refused: more bytes than are free now, with nothing else counted.
    Three checks, each naming the fields, the bytes needed and free, and values that fit:

    - the device tiers (`Plan.device_bytes`: L1, L2 with its priorities, and the rows
      prefetched from L3; of all seeds, split over `seed_devices`) against the device's free
      memory (`available_memory`: `memory_stats()` on a GPU/TPU, host RAM on a CPU); skipped
      when an accelerator does not report its memory;
    - `l3="host"`: L3 against free host RAM, less the device tiers when the device is a CPU
      (they live in host RAM too);
    - `l3="disk"`: L3 against the free space of `spill_dir` plus what reclaiming the spill
      directories of killed runs would free (`spill_dirs.find_stale_spill_dirs`).

    Args:
      config: the run; a share capacity is resolved as `plan` does.
      device: the device L2 lives on; None means `jax.devices()[0]`.
      device_memory: free device memory in bytes, instead of asking the device.
      host_memory: free host RAM in bytes, instead of /proc/meminfo's MemAvailable.
      spec: the env's `EnvSpec`; None builds it from `config.env`.
      seed_devices: devices of the device's kind the seeds are spread over (each holds
        `num_seeds / seed_devices` seeds).

    Returns:
      The `Plan`.

    Raises:
      ValueError: a tier does not fit (naming `ReplayConfig.capacity`, `ReplayConfig.l3_capacity`
        and `TrainConfig.num_seeds`), or a `plan` error.

    Examples:
      >>> cfg = TrainConfig().replace(replay={"capacity": 10**10})  # CartPole: 30 B a row
      >>> check_fits(cfg, device_memory=10**9, host_memory=10**9)  # doctest: +ELLIPSIS
      Traceback (most recent call last):
        ...
      ValueError: ReplayConfig.capacity=10000000000 rows per seed x TrainConfig.num_seeds=1 ...
    """
    if device is None and device_memory is None:
        import jax

        device = jax.devices()[0]
    on_cpu = getattr(device, "platform", None) == "cpu"
    source = "given"
    if device_memory is None:
        try:
            device_memory, source = available_memory(device)
        except ValueError:  # an accelerator without memory statistics: no device check
            device_memory, source = None, None
    p = plan(config, device_memory=device_memory or 1, spec=spec)
    spread = 1 if on_cpu else max(1, seed_devices)
    need = -(-p.device_bytes // spread)
    if device_memory is not None and need > device_memory:
        raise ValueError(_device_message(config, p, need, device_memory, source, spread, spec))
    if p.l3 == "host":
        host = host_available_memory() if host_memory is None else host_memory
        free = host - need if on_cpu else host
        also = ", less the device tiers a CPU keeps there too" if on_cpu else ""
        if p.l3_bytes > free:
            raise ValueError(_l3_message(config, p, free, f"host RAM, MemAvailable{also}"))
    if p.l3 == "disk" and p.l3_available is not None:
        stale = find_stale_spill_dirs(config.replay.spill_dir).gone
        reclaim = sum(u.disk_bytes for u in stale)
        if p.l3_bytes > p.l3_available + reclaim:
            where = f"disk of spill_dir={config.replay.spill_dir!r}" + (
                f", counting {_fmt(reclaim)} of killed runs' spill dirs to reclaim" if stale else ""
            )
            raise ValueError(_l3_message(config, p, p.l3_available + reclaim, where))
    return p


def _device_message(
    config: TrainConfig, p: Plan, need: int, memory: int, source: str, spread: int, spec: Any
) -> str:
    """The one-line error of a device that cannot hold the device tiers (`check_fits`)."""
    seeds, replay = config.num_seeds, config.replay
    split = f" each of {spread} devices holding {seeds // spread} seed(s)," if spread > 1 else ""
    fixes = []
    rows = None
    if p.l3_prefetch_bytes // spread < memory:
        obs_shape, obs_dtype, stack = obs_spec(config, spec)
        per_device = config.replace(num_seeds=max(1, seeds // spread))
        room = memory - p.l3_prefetch_bytes // spread
        try:
            rows = rows_for_share(per_device, obs_shape, obs_dtype, 1.0, room, source, stack)
        except ValueError:  # not even the smallest L2 fits these seeds
            rows = None
    if rows is not None:  # else even the smallest L2 is too big for these seeds: no share fits
        fixes.append(f"ReplayConfig.capacity={rows} or less")
        fixes.append('a share of free memory, e.g. capacity="auto:0.3"')
    most = memory * spread // max(1, -(-p.device_bytes // seeds))  # per-seed bytes, all tiers
    if 0 < most < seeds:
        fixes.append(f"TrainConfig.num_seeds={most} or fewer")
    if not fixes:
        fixes.append("fewer envs (EnvConfig.num_envs) or a device with more free memory")
    prefetch = f", L3 prefetch {_fmt(p.l3_prefetch_bytes)}" if p.l3_prefetch_bytes else ""
    capacity = replay.capacity if p.share is None else f"{replay.capacity!r} ({p.l2_rows}"
    capacity = f"{capacity} rows per seed" + ("" if p.share is None else ")")
    return (
        f"ReplayConfig.capacity={capacity} x TrainConfig.num_seeds={seeds} "
        f"does not fit on the device:{split} the replay needs {_fmt(need)} ({need:,} bytes: "
        f"L1 {_fmt(p.l1_bytes)}, L2 {_fmt(p.l2_bytes)}{prefetch} over all seeds) but "
        f"{_fmt(memory)} ({memory:,} bytes) is free ({source}). Use "
        + "; or ".join(fixes)
        + " (`jaxrl-fast plan` prints the tiers)."
    )


def _l3_message(config: TrainConfig, p: Plan, free: int, where: str) -> str:
    """The one-line error of an L3 that does not fit its host RAM or disk (`check_fits`)."""
    seeds, e = config.num_seeds, config.env.num_envs
    rows = max(free, 0) // (seeds * p.row_bytes) // e * e
    fix = f"ReplayConfig.l3_capacity={rows} or less" if rows else "fewer seeds"
    other = 'l3="disk" with a spill_dir' if p.l3 == "host" else "another spill_dir"
    return (
        f"ReplayConfig.l3_capacity={config.replay.l3_capacity} rows per seed x "
        f"TrainConfig.num_seeds={seeds} does not fit (l3={p.l3!r}): L3 needs {_fmt(p.l3_bytes)} "
        f"({p.l3_bytes:,} bytes) but {_fmt(max(free, 0))} ({max(free, 0):,} bytes) is free "
        f"({where}). Use {fix}, or {other}."
    )
