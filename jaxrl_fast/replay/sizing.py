"""Replay sizing: resolve a memory-share capacity to L2 rows and plan each tier's memory.

`ReplayConfig.capacity` may be a share of free device memory ("auto:0.3", or the presets "small" =
30%, "medium" = 50%, "large" = 70%; docs/replay-memory-plan.md). `resolve_capacity` turns it into
the largest number of L2 rows that fits: per seed, the ring's rows (`layout.row_bytes` each, plus
the PER sampler's priorities when prioritised) and the L1 staging window must fit in `share x free
memory / num_seeds`. `plan` reports the bytes of every tier (the `jaxrl-fast plan` command prints
it); `replay/fits.py` (`check_fits`) refuses, from the plan, a run whose replay cannot fit. Nothing
here compiles: the env's observation shape comes from its spec. Every byte count comes from
`replay/layout.py`. Byte units follow SI for kB/MB/GB/TB (powers of 1000) and IEC for
KiB/MiB/GiB/TiB (powers of 1024), in `parse_bytes` and in the rendered plan.
"""

from __future__ import annotations

import dataclasses
import os
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
from jaxrl_fast.replay.memory import available_memory, host_available_memory
from jaxrl_fast.replay.ring import MAX_ROWS
from jaxrl_fast.replay.spill_dirs import format_bytes as _fmt


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


def obs_spec(config: TrainConfig, spec: Any) -> tuple[tuple[int, ...], Any, int]:
    """Observation shape and dtype of `config`'s env (from `spec`, or built from `config.env`
    without compiling when None), and the frame stack L2 deduplicates (0: none)."""
    if spec is None:
        from jaxrl_fast.envs import make_env

        spec = make_env(  # traces nothing heavy
            config.env.name,
            config.env.num_envs,
            atari=config.env.atari,
            discretise=config.env.discretise,
        ).spec
    stack = dedup_stack(config.replay.dedup_frames, getattr(spec, "frame_stack", 0))
    return tuple(spec.obs_shape), np.dtype(spec.obs_dtype), stack


def _memory(device: Any, device_memory: int | None) -> tuple[int, str]:
    if device_memory is None:
        return available_memory(device)
    if isinstance(device_memory, bool) or not isinstance(device_memory, int) or device_memory < 1:
        raise ValueError(f"device_memory={device_memory!r} is not allowed; expected bytes > 0.")
    return device_memory, "given"


def rows_for_share(
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
    obs_shape, obs_dtype, frame_stack = obs_spec(config, spec)
    memory, source = _memory(device, device_memory)
    rows = rows_for_share(config, obs_shape, obs_dtype, share, memory, source, frame_stack)
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
    obs_shape, obs_dtype, frame_stack = obs_spec(config, spec)
    memory, source = _memory(device, device_memory)
    share = capacity_share(config.replay.capacity)
    rows = config.replay.capacity
    if share is not None:
        rows = rows_for_share(config, obs_shape, obs_dtype, share, memory, source, frame_stack)
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
