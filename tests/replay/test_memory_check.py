"""`resolve` refuses a replay that cannot fit before anything is allocated or compiled
(`replay.fits.check_fits`): a huge int `ReplayConfig.capacity`, a huge `TrainConfig.num_seeds`,
a huge host L3; the message names the field and the plan's figures, and a large run that fits
still resolves."""

from __future__ import annotations

import re

import jax
import pytest

from jaxrl_fast import presets
from jaxrl_fast.envs.seeded import make_seeded
from jaxrl_fast.loop.resolve import resolve
from jaxrl_fast.replay.fits import check_fits
from jaxrl_fast.replay.memory import available_memory
from jaxrl_fast.replay.sizing import plan


@pytest.fixture
def compiles():
    """The XLA compilations made while the test runs (after the CartPole env was built once:
    building it compiles a few one-op programs, as it always has)."""
    make_seeded(presets.get("cartpole").env, 1)
    events: list[str] = []

    def listen(event: str, *args, **kwargs) -> None:
        if event.endswith("backend_compile_duration"):
            events.append(event)

    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        yield events
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)


def _free_in(message: str) -> int:
    """The free bytes a refusal names: "... (23,678,652,416 bytes) is free (...)"."""
    return int(re.search(r"\(([\d,]+) bytes\) is free", message).group(1).replace(",", ""))


def _source() -> str:
    return available_memory(jax.local_devices()[0])[1]


def test_huge_capacity_is_refused_before_compiling(compiles):
    cfg = presets.get("cartpole").replace(replay={"capacity": 10**10})  # 300 GB of CartPole rows
    with pytest.raises(ValueError) as err:
        resolve(cfg)
    msg = str(err.value)
    need = plan(cfg, device_memory=1).device_bytes  # 10**10 x 30 + 10 x 27 x ... bytes
    assert msg.startswith(
        "ReplayConfig.capacity=10000000000 rows per seed x TrainConfig.num_seeds=1"
    )
    assert f"({need:,} bytes" in msg and f"is free ({_source()})" in msg and "\n" not in msg
    assert 'capacity="auto:0.3"' in msg
    rows = int(re.search(r"ReplayConfig\.capacity=(\d+) or less", msg).group(1))
    assert 0 < rows < 10**10 and rows % cfg.env.num_envs == 0
    check_fits(cfg.replace(replay={"capacity": rows}), device_memory=_free_in(msg))  # it fits
    assert compiles == []
    jax.jit(lambda x: x + 1)(1)  # the listener does see compiles
    assert compiles


def test_huge_num_seeds_is_refused_before_compiling(compiles):
    cfg = presets.get("cartpole").replace(num_seeds=10**7)  # 10,000 rows x 10**7 seeds: 3 TB
    with pytest.raises(ValueError) as err:
        resolve(cfg)
    msg = str(err.value)
    need = plan(cfg, device_memory=1).device_bytes
    assert "ReplayConfig.capacity=10000 rows per seed x TrainConfig.num_seeds=10000000 " in msg
    assert f"({need:,} bytes" in msg
    seeds = int(re.search(r"TrainConfig\.num_seeds=(\d+) or fewer", msg).group(1))
    assert 0 < seeds < 10**7
    check_fits(cfg.replace(num_seeds=seeds), device_memory=_free_in(msg))  # that many fit
    assert compiles == []


def test_huge_host_l3_is_refused(compiles):
    replay = {"l3": "host", "l3_capacity": 10**10, "l3_share": 0.25}  # 300 GB of host RAM
    cfg = presets.get("cartpole").replace(replay=replay)
    with pytest.raises(ValueError, match=r"ReplayConfig\.l3_capacity=10000000000 rows per seed"):
        resolve(cfg)
    assert compiles == []


def test_large_capacity_that_fits_resolves():
    cfg = presets.get("cartpole")
    free = available_memory(jax.local_devices()[0])[0]
    rows = free // 2 // 30 // 10 * 10  # half the free memory in 30-byte CartPole rows
    run = resolve(cfg.replace(replay={"capacity": min(rows, 2**30 - 10)}))  # allocates nothing
    assert run.config.replay.capacity == min(rows, 2**30 - 10)


def test_the_replay_splits_over_gpus_only_where_the_seeds_do():
    """On 4 GPUs, 8 seeds spread over all 4 (a quarter of the replay each); a pool env or L3's
    host callbacks keep all seeds, and so all the replay, on one: checked against one GPU."""
    from types import SimpleNamespace

    from jaxrl_fast.loop.resolve import memory_spread

    gpus = [SimpleNamespace(platform="gpu", id=i) for i in range(4)]
    assert memory_spread(8, gpus[0], local=gpus) == 4
    assert memory_spread(6, gpus[0], local=gpus) == 3  # the most that divide the seeds
    assert memory_spread(8, gpus[0], one_device=True, local=gpus) == 1
    assert memory_spread(8, SimpleNamespace(platform="cpu"), local=gpus) == 1
    # 8 seeds x 30 GB of rows: fits devices with a quarter of it free 4 ways, not 1 way
    cfg = presets.get("cartpole").replace(num_seeds=8, replay={"capacity": 10**9})
    needed = plan(cfg).device_bytes
    check_fits(cfg, device_memory=needed // 4 + 1, host_memory=10**15, seed_devices=4)
    with pytest.raises(ValueError, match="ReplayConfig.capacity"):
        check_fits(cfg, device_memory=needed // 4 + 1, host_memory=10**15, seed_devices=1)
