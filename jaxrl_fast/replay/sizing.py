"""Replay sizing: resolve a memory-share capacity to L2 rows and plan each tier's memory.

`ReplayConfig.capacity` may be a share of free device memory ("auto:0.3", or the presets
"small" = 30%, "medium" = 50%, "large" = 70%; DESIGN §4). `resolve_capacity` turns it into the
largest number of L2 rows that fits: per seed, the ring's rows (`layout.row_bytes` each, plus the
PER sampler's priorities when prioritised) and the L1 staging window must fit in
`share x free memory / num_seeds`. `plan` reports the bytes of every tier (the `jaxrl-fast plan`
command prints it), and `check_fits` refuses, before anything is allocated, a run whose replay
cannot fit: the device tiers in the device's free memory, L3 in free host RAM or disk. Nothing
here compiles: the env's observation shape comes from its spec. Every byte count comes from
`replay/layout.py`.

Byte units follow SI for kB/MB/GB/TB (powers of 1000) and IEC for KiB/MiB/GiB/TiB (powers of
1024), in `parse_bytes` and in the rendered plan.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import shutil
from typing import Any

import numpy as np

from jaxrl_fast.config import TrainConfig, capacity_share
from jaxrl_fast.replay import prioritised
from jaxrl_fast.replay.l3 import plan_l3
from jaxrl_fast.replay.layout import (
    dedup_stack,
    naive_row_bytes,
    obs_bytes,
    prefetch_row_bytes,
    priority_bytes,
    row_bytes,
    staging_bytes,
)
from jaxrl_fast.replay.ring import MAX_ROWS
from jaxrl_fast.replay.spill import find_stale_spill_dirs
from jaxrl_fast.replay.spill import format_bytes as _fmt

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
    except (OSError, ValueError, IndexError):
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


def seed_device_bytes(
    rows: int,
    obs_shape: tuple[int, ...],
    obs_dtype: Any,
    *,
    num_envs: int,
    n_step: int = 1,
    prioritised_sampler: str | None = None,
    frame_stack: int = 0,
) -> int:
    """Device bytes of one seed's L1 window and `rows`-row L2 ring (with priorities).
    `frame_stack` k > 1: L2 stores one frame per row (`layout.row_bytes`).

    Args:
      rows: L2 rows.
      obs_shape, obs_dtype: one observation.
      num_envs, n_step: the L1 window is `n_step x num_envs` steps.
      prioritised_sampler: "cumsum", "sum_tree", "auto" (resolved for `rows`), or None when
        sampling is uniform (no priorities).

    Examples:
      >>> seed_device_bytes(1000, (4,), "float32", num_envs=10)  # 1000 x 30 + 10 x 27
      30270
      >>> seed_device_bytes(1000, (4,), "float32", num_envs=10, prioritised_sampler="cumsum")
      34270
    """
    total = rows * row_bytes(obs_shape, obs_dtype, frame_stack)
    total += staging_bytes(obs_shape, obs_dtype, n_step=n_step, num_envs=num_envs)
    if prioritised_sampler is not None:
        total += priority_bytes(rows, prioritised.resolve_sampler(prioritised_sampler, rows))
    return total


def _obs_spec(config: TrainConfig, spec: Any) -> tuple[tuple[int, ...], Any, int]:
    """Observation shape and dtype, and the frame stack L2 deduplicates (0: none)."""
    if spec is None:
        from jaxrl_fast.envs import make_env

        spec = make_env(  # traces nothing heavy
            config.env.name, config.env.num_envs, atari=config.env.atari
        ).spec
    stack = dedup_stack(config.replay.dedup_frames, getattr(spec, "frame_stack", 0))
    return tuple(spec.obs_shape), np.dtype(spec.obs_dtype), stack


def _memory(device: Any, device_memory: int | None) -> tuple[int, str]:
    if device_memory is None:
        return available_memory(device)
    if isinstance(device_memory, bool) or not isinstance(device_memory, int) or device_memory < 1:
        raise ValueError(f"device_memory={device_memory!r} is not allowed; expected bytes > 0.")
    return device_memory, "given"


def _rows_for_share(
    config: TrainConfig,
    obs_shape: tuple[int, ...],
    obs_dtype: Any,
    share: float,
    memory: int,
    source: str,
    frame_stack: int = 0,
) -> int:
    """The most L2 rows per seed (a multiple of num_envs) that fit in `share x memory`."""
    replay, e, seeds = config.replay, config.env.num_envs, config.num_seeds
    sampler = replay.sampler if replay.prioritised else None

    def need(rows: int) -> int:
        return seed_device_bytes(
            rows,
            obs_shape,
            obs_dtype,
            num_envs=e,
            n_step=replay.n_step,
            prioritised_sampler=sampler,
            frame_stack=frame_stack,
        )

    budget = int(share * memory) // seeds
    lo = max(replay.n_step + 1, -(-replay.batch_size // e))  # slots; batch_size rounded up
    if need(lo * e) > budget:
        raise ValueError(
            f"ReplayConfig.capacity={replay.capacity!r} is not allowed here: a share of "
            f"{share:g} x {_fmt(memory)} free memory ({source}) / {seeds} seed(s) = "
            f"{_fmt(budget)} per seed, but the minimum L2 of {lo * e} rows (max of (n_step + 1) "
            f"x num_envs and batch_size) with its L1 window needs {need(lo * e):,} bytes per "
            f"seed ({need(lo * e) * seeds:,} bytes in all). Use a larger share, fewer seeds or "
            f"envs, or an int capacity."
        )
    # need() grows with rows (the sum tree has at least as many bytes per row as cumsum), so
    # bisect on slots for the largest that fits.
    hi = max(lo, min(budget // (row_bytes(obs_shape, obs_dtype, frame_stack) * e), MAX_ROWS // e))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if need(mid * e) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return lo * e


def resolve_capacity(
    config: TrainConfig,
    *,
    device: Any = None,
    device_memory: int | None = None,
    spec: Any = None,
) -> TrainConfig:
    """Return `config` with `replay.capacity` as a number of L2 rows per seed.

    An int capacity is returned unchanged. A share ("auto:0.3", "small", "medium", "large")
    becomes the largest multiple of `env.num_envs` whose L2 ring (with PER priorities) and L1
    staging window, for all `num_seeds` seeds, fit in `share x free memory`; at least
    `(n_step + 1) x num_envs` rows and at least `batch_size`, at most `MAX_ROWS`.

    Args:
      config: the run; `config.replay.capacity` an int or a share string.
      device: where L2 lives; None means `jax.devices()[0]`. Read only when `device_memory` is
        None: a GPU/TPU's `memory_stats()` (`bytes_limit - bytes_in_use`), host RAM on a CPU.
      device_memory: free memory in bytes, instead of asking the device.
      spec: the env's `EnvSpec`; None builds it from `config.env` (no compilation).

    Returns:
      A copy of `config` with an int `replay.capacity`.

    Raises:
      ValueError: even the minimum capacity does not fit (the message names
        `ReplayConfig.capacity`, the share, the memory found and the bytes needed), or the
        device's free memory cannot be read.

    Examples:
      >>> cfg = TrainConfig().replace(replay={"capacity": "auto:0.5"})  # CartPole, 10 envs
      >>> resolve_capacity(cfg, device_memory=10**6).replay.capacity  # (500_000 - 270) // 30
      16650
    """
    share = capacity_share(config.replay.capacity)
    if share is None:
        return config
    obs_shape, obs_dtype, frame_stack = _obs_spec(config, spec)
    memory, source = _memory(device, device_memory)
    rows = _rows_for_share(config, obs_shape, obs_dtype, share, memory, source, frame_stack)
    return config.replace(replay={"capacity": rows})


@dataclasses.dataclass(frozen=True)
class Plan:
    """Memory of each replay tier for one run. Rows are per seed; bytes cover all seeds.

    Attributes:
      env, obs_shape, obs_dtype, num_envs, num_seeds, n_step: the run.
      capacity: `ReplayConfig.capacity` as configured (an int or a share string).
      share: the memory share asked for, or None for an int capacity.
      sampler: the PER sampler used ("cumsum" or "sum_tree"), None when uniform.
      row_bytes: bytes of one L2 row (observation stored once).
      bytes_per_transition: `row_bytes` plus the priority bytes per row.
      naive_row_bytes: bytes per transition storing `obs` and `next_obs` (baseline layout).
      l1_rows, l2_rows, l3_rows: rows per seed of the staging window, the ring and L3.
      l1_bytes, l2_bytes, l3_bytes: bytes over all seeds (L2 includes the priorities).
      naive_l2_bytes: what `l2_rows` would take in the baseline layout.
      l3: "off", "host" or "disk"; l3_where says where, in words.
      spill_block_slots: slots per spill call (`l3.plan_l3`), None when L3 is off.
      spill_block_bytes: bytes moved per spill call, None when L3 is off.
      l3_prefetch_bytes: device bytes of the rows prefetched from L3 (all seeds).
      l3_available: free host RAM (host) or disk space (disk) for L3; None when unknown.
      device_memory, memory_source: free device memory in bytes and where it came from.
      device_bytes: L1 + L2 + L3 prefetch bytes on the device.
      fits: `device_bytes <= device_memory`.
    """

    env: str
    obs_shape: tuple[int, ...]
    obs_dtype: str
    num_envs: int
    num_seeds: int
    n_step: int
    capacity: int | str
    share: float | None
    sampler: str | None
    row_bytes: int
    bytes_per_transition: float
    naive_row_bytes: int
    l1_rows: int
    l2_rows: int
    l3_rows: int
    l1_bytes: int
    l2_bytes: int
    l3_bytes: int
    naive_l2_bytes: int
    l3: str
    l3_where: str
    spill_block_slots: int | None
    spill_block_bytes: int | None
    l3_prefetch_bytes: int
    l3_available: int | None
    device_memory: int
    memory_source: str
    device_bytes: int
    fits: bool

    def to_dict(self) -> dict[str, Any]:
        """Return the plan as JSON-ready data."""
        out = dataclasses.asdict(self)
        out["obs_shape"] = list(self.obs_shape)
        return out

    def render(self) -> str:
        """Return the plan as a text table."""
        obs = f"obs {self.obs_shape} {self.obs_dtype}"
        lines = [
            f"replay plan: {self.env}, {obs}, {self.num_envs} envs x {self.num_seeds} seed(s), "
            f"n_step {self.n_step}"
        ]
        if self.share is None:
            lines.append(f"L2 capacity: {self.l2_rows:,} rows per seed")
        else:
            lines.append(
                f"L2 capacity: {self.capacity!r} -> {self.l2_rows:,} rows per seed "
                f"({self.share:.0%} of {_fmt(self.device_memory)})"
            )
            if self.l2_rows + self.num_envs > MAX_ROWS:
                lines.append(f"  capped at MAX_ROWS={MAX_ROWS:,} (int32 row and tree indices)")
        extra = self.bytes_per_transition - self.row_bytes
        per = f" + priorities ({self.sampler}) {extra:.2f} B" if self.sampler else ""
        whole = obs_bytes(self.obs_shape, self.obs_dtype)
        stored = "one frame per row" if self.row_bytes < whole else "obs stored once"
        lines += [
            f"bytes per transition: {self.bytes_per_transition:,.2f} (L2 row {self.row_bytes:,} B, "
            f"{stored}{per})",
            f"  storing obs and next_obs instead: {self.naive_row_bytes:,} B per transition, "
            f"{_fmt(self.naive_l2_bytes)} for L2 ({self.naive_row_bytes / self.row_bytes:.2f}x)",
            "",
            f"{'tier':<6}{'where':<28}{'rows/seed':>14}{'bytes (all seeds)':>20}",
            f"{'L1':<6}{'device (staging)':<28}{self.l1_rows:>14,}{_fmt(self.l1_bytes):>20}",
            f"{'L2':<6}{'device (ring)':<28}{self.l2_rows:>14,}{_fmt(self.l2_bytes):>20}",
        ]
        if self.l3 == "off":
            lines.append(f"{'L3':<6}{'off':<28}{'-':>14}{'-':>20}")
        else:
            lines.append(
                f"{'L3':<6}{self.l3_where:<28}{self.l3_rows:>14,}{_fmt(self.l3_bytes):>20}"
            )
            lines.append(
                f"  spill block: {self.spill_block_slots} slots "
                f"({self.spill_block_slots * self.num_envs:,} rows per seed, "
                f"{_fmt(self.spill_block_bytes)} per spill call)"
            )
            if self.l3_prefetch_bytes:
                lines.append(f"  L3 rows prefetched on device: {_fmt(self.l3_prefetch_bytes)}")
            if self.l3_available is not None:
                room = "fits" if self.l3_bytes <= self.l3_available else "does NOT fit"
                lines.append(f"  L3 {room} in {_fmt(self.l3_available)} free {self.l3_where}")
        short = self.device_bytes - self.device_memory
        verdict = (
            f"fits ({self.device_bytes / self.device_memory:.1%} used)"
            if self.fits
            else f"does NOT fit ({_fmt(short)} short)"
        )
        lines += [
            "",
            f"device: {_fmt(self.device_bytes)} needed, {_fmt(self.device_memory)} available "
            f"({self.memory_source}): {verdict}",
        ]
        return "\n".join(lines)


def plan(
    config: TrainConfig,
    *,
    device: Any = None,
    device_memory: int | None = None,
    spec: Any = None,
) -> Plan:
    """Plan the replay memory of `config`: rows and bytes of L1, L2 and L3.

    Args:
      config: the run; a share capacity is resolved as `resolve_capacity` does.
      device, device_memory, spec: as for `resolve_capacity`.

    Returns:
      A `Plan`; `plan(...).render()` is the table `jaxrl-fast plan` prints.

    Raises:
      ValueError: from `resolve_capacity`, or an L3 layout `l3.plan_l3` rejects.

    Examples:
      >>> p = plan(TrainConfig(), device_memory=10**9)  # CartPole, 10 envs, 10,000 rows
      >>> p.row_bytes, p.l2_bytes, p.naive_row_bytes, p.fits
      (30, 300000, 41, True)
    """
    obs_shape, obs_dtype, frame_stack = _obs_spec(config, spec)
    memory, source = _memory(device, device_memory)
    share = capacity_share(config.replay.capacity)
    rows = config.replay.capacity
    if share is not None:
        rows = _rows_for_share(config, obs_shape, obs_dtype, share, memory, source, frame_stack)
    replay = dataclasses.replace(config.replay, capacity=rows)
    e, seeds, n = config.env.num_envs, config.num_seeds, replay.n_step
    row = row_bytes(obs_shape, obs_dtype, frame_stack)
    naive = naive_row_bytes(obs_shape, obs_dtype)
    sampler = prioritised.resolve_sampler(replay.sampler, rows) if replay.prioritised else None
    prio = priority_bytes(rows, sampler) if sampler else 0
    l1 = staging_bytes(obs_shape, obs_dtype, n_step=n, num_envs=e)
    layout = plan_l3(
        replay,
        num_envs=e,
        num_seeds=seeds,
        obs_shape=obs_shape,
        obs_dtype=obs_dtype,
        sync_every=config.collect_steps_per_block,
        updates_per_sync=config.updates_per_block,
        frame_stack=frame_stack,
    )
    l3_rows = replay.l3_capacity if layout is not None else 0
    l3_bytes = l3_rows * seeds * row
    prefetch = 0
    where, available = "off", None
    if layout is not None:
        prefetch = seeds * layout.batches * layout.rows * prefetch_row_bytes(obs_shape, obs_dtype)
        if replay.l3 == "host":
            where, available = "host RAM", host_available_memory()
        else:
            where = f"disk ({replay.spill_dir})"
            if os.path.isdir(replay.spill_dir):
                available = shutil.disk_usage(replay.spill_dir).free
    l2_bytes = seeds * (rows * row + prio)
    device_bytes = seeds * l1 + l2_bytes + prefetch
    return Plan(
        env=config.env.name,
        obs_shape=obs_shape,
        obs_dtype=obs_dtype.name,
        num_envs=e,
        num_seeds=seeds,
        n_step=n,
        capacity=config.replay.capacity,
        share=share,
        sampler=sampler,
        row_bytes=row,
        bytes_per_transition=row + prio / rows,
        naive_row_bytes=naive,
        l1_rows=n * e,
        l2_rows=rows,
        l3_rows=l3_rows,
        l1_bytes=seeds * l1,
        l2_bytes=l2_bytes,
        l3_bytes=l3_bytes,
        naive_l2_bytes=seeds * rows * naive,
        l3=replay.l3,
        l3_where=where,
        spill_block_slots=None if layout is None else layout.block,
        spill_block_bytes=None if layout is None else layout.block * e * seeds * row,
        l3_prefetch_bytes=prefetch,
        l3_available=available,
        device_memory=memory,
        memory_source=source,
        device_bytes=device_bytes,
        fits=device_bytes <= memory,
    )


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
      directories of killed runs would free (`spill.find_stale_spill_dirs`).

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
        obs_shape, obs_dtype, stack = _obs_spec(config, spec)
        per_device = config.replace(num_seeds=max(1, seeds // spread))
        room = memory - p.l3_prefetch_bytes // spread
        try:
            rows = _rows_for_share(per_device, obs_shape, obs_dtype, 1.0, room, source, stack)
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
