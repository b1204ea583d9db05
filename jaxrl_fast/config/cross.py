"""The checks of a `TrainConfig` that span its parts (data replicas,
recurrent replay, demonstrations), each raising a `ValueError` that names the fields and the fix.
`TrainConfig.__post_init__` runs them on itself."""

from __future__ import annotations

from typing import Any


def check_parallel(cfg: Any) -> None:
    """Data replicas need per-device state: no pool env, no host tier; `every:K` syncs on
    update boundaries."""
    data = cfg.parallel.data
    if data == 1:
        return
    if cfg.env.is_envpool:
        raise ValueError(
            f"ParallelConfig.data={data} is not allowed with an envpool env "
            f"({cfg.env.name!r}): its pool is one host object that keeps every seed on one "
            "device. Use data=1 (seeds still spread over devices), or a gymnax env."
        )
    if cfg.replay.l3 != "off":
        raise ValueError(
            f"ParallelConfig.data={data} is not allowed with ReplayConfig.l3="
            f"{cfg.replay.l3!r}: the host tier's callbacks keep the seeds on one device. "
            "Use l3='off'."
        )


def check_recurrent(cfg: Any) -> None:
    """A recurrent network and sequence replay go together; the ring holds a sequence."""
    lstm, length = cfg.network.lstm, cfg.replay.sequence_length
    if bool(lstm) != bool(length):
        raise ValueError(
            f"NetworkConfig.lstm={lstm} with ReplayConfig.sequence_length={length} is not "
            "allowed: a recurrent network (lstm > 0) trains on stored sequences "
            "(sequence_length > 0, e.g. 8) and sequences need one; set both or neither."
        )
    window = cfg.replay.burn_in + length + cfg.replay.n_step
    cap = cfg.replay.capacity
    if length and not isinstance(cap, int):
        raise ValueError(
            f"ReplayConfig.capacity={cap!r} is not allowed with sequence_length={length}: "
            "memory shares do not count the stored recurrent state yet; give a number of "
            "rows, e.g. 100000."
        )
    if length and isinstance(cap, int) and cap < window * cfg.env.num_envs:
        raise ValueError(
            f"ReplayConfig.capacity={cap} is not allowed with sequences of burn_in + "
            f"sequence_length + n_step = {window} steps; expected at least "
            f"{window * cfg.env.num_envs} ({window} steps of env.num_envs="
            f"{cfg.env.num_envs})."
        )


def check_demos(cfg: Any) -> None:
    """Demonstrations mix into transition batches from L2 only."""
    demo = cfg.demo
    if not demo.active:
        return
    if cfg.env.is_envpool:
        raise ValueError(
            f"DemoConfig.source={demo.source!r} is not allowed with EnvConfig.name="
            f"{cfg.env.name!r}: demonstrations are played and replayed on JAX envs, and an "
            "envpool env is not one; use source=''."
        )
    if cfg.network.lstm or cfg.replay.l3 != "off":
        raise ValueError(
            f"DemoConfig.source={demo.source!r} is not allowed with NetworkConfig.lstm="
            f"{cfg.network.lstm}, ReplayConfig.l3={cfg.replay.l3!r}: demonstration rows "
            "join batches of transitions drawn from the device ring; use lstm=0, l3='off'."
        )
    if cfg.schedule.gamma_schedule != "constant":
        raise ValueError(
            f"DemoConfig.source={demo.source!r} is not allowed with "
            f"ScheduleConfig.gamma_schedule={cfg.schedule.gamma_schedule!r}: demonstration "
            "rows are staged once, with DQNConfig.gamma; use gamma_schedule='constant'."
        )
    rows = cfg.demo_rows_per_batch
    if not 0 < rows < cfg.replay.batch_size:
        raise ValueError(
            f"DemoConfig.share={demo.share} of ReplayConfig.batch_size="
            f"{cfg.replay.batch_size} gives {rows} demonstration rows per batch; expected "
            f"between 1 and {cfg.replay.batch_size - 1}."
        )
